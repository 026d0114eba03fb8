"""moto's DynamoDB, patched: each request is atomic, as in DynamoDB.

11. moto serves requests from many threads at once (each execution runs in a thread of its own, and so
   does each request to the dev server) on plain dicts. A read racing a write could fail (RuntimeError:
   dictionary changed size), and a TransactWriteItems copies each table it touches and, when cancelled
   (a condition failed: the dispatcher's claim on a full running set), puts the copies back, undoing
   every write other threads made meanwhile: a queue entry, a released slot, a claim, so a queued
   mission could wait forever. moto now serves them one at a time (re-entrant: a write's stream record
   may invoke a function that writes again, in the same thread).
"""

from __future__ import annotations

import threading
from typing import Any

from missions.local.moto._mechanism import Patch

_DYNAMODB = threading.RLock()


def _one_request_at_a_time(self: Any) -> Any:
    """moto's own DynamoDB request handling, holding the one lock every DynamoDB request takes."""
    with _DYNAMODB:
        return ONE_REQUEST_AT_A_TIME.original(self)


ONE_REQUEST_AT_A_TIME = Patch(
    "moto.dynamodb.responses:DynamoHandler",
    "call_action",
    _one_request_at_a_time,
    "11: moto serves DynamoDB requests from many threads at once on plain dicts; one at a time, as atomic",
)
PATCHES = (ONE_REQUEST_AT_A_TIME,)
