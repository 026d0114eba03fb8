"""The cheapest call that proves each AWS dependency answers, for `GET /ready` (missions.service.health).

DescribeTable and DescribeEventBus read metadata only: no item, no event, no capacity consumed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def table_check(client: Any, table: str) -> Callable[[], None]:
    def check() -> None:
        status = client.describe_table(TableName=table)["Table"].get("TableStatus")
        if status not in (None, "ACTIVE", "UPDATING"):
            raise RuntimeError(f"table {table} is {status}")

    return check


def bus_check(client: Any, bus: str) -> Callable[[], None]:
    def check() -> None:
        client.describe_event_bus(Name=bus)

    return check


__all__ = ["bus_check", "table_check"]
