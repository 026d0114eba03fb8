"""What a mission costs in AWS infrastructure: usage counted from a run, priced at list prices.

Pure (no I/O, no SDK): the emulation's meter (missions.local.metering) counts a real run into a
`Usage`; `estimate` prices it. LLM tokens are priced elsewhere (the envelope's own counters).

DynamoDB units follow AWS's published rules (developerguide/CapacityUnitCalculations.html and
"read/write consumption" for on-demand tables). Approximations, all documented in place:
- numbers are sized as AWS says, "approximately": 1 byte per two significant digits + 1;
- the caller decides which item a rule is applied to (e.g. for Query, the items returned).
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

PRICES_AS_OF = "2026-11-01"
EVENT_CHUNK_BYTES = 64 * 1024


@dataclass(frozen=True)
class Prices:
    """us-east-1 list prices in dollars per unit, no free tier."""

    as_of: str
    state_transition: float  # Step Functions Standard
    express_request: float  # Step Functions Express: each execution started
    express_gb_second: float  # Step Functions Express duration (first 1,000 GB-hours a month)
    lambda_request: float
    lambda_gb_second_arm64: float
    lambda_gb_second_x86_64: float
    dynamodb_read_unit: float  # on-demand read request unit
    dynamodb_write_unit: float  # on-demand write request unit
    s3_put: float  # S3 Standard PUT/COPY/POST/LIST
    s3_get: float  # S3 Standard GET/SELECT
    event: float  # EventBridge custom event (each 64 KB chunk of an entry)

    def lambda_gb_second(self, architecture: str) -> float:
        return self.lambda_gb_second_arm64 if architecture == "arm64" else self.lambda_gb_second_x86_64


# The one price table. DynamoDB's are the on-demand prices after the November 2024 cut.
PRICES = Prices(
    as_of=PRICES_AS_OF,
    state_transition=0.025 / 1_000,
    express_request=1.00 / 1_000_000,
    express_gb_second=0.00001667,
    lambda_request=0.20 / 1_000_000,
    lambda_gb_second_arm64=0.0000133334,
    lambda_gb_second_x86_64=0.0000166667,
    dynamodb_read_unit=0.125 / 1_000_000,
    dynamodb_write_unit=0.625 / 1_000_000,
    s3_put=0.005 / 1_000,
    s3_get=0.0004 / 1_000,
    event=1.00 / 1_000_000,
)


@dataclass(frozen=True)
class Usage:
    """Billable quantities of one mission (or a sum of missions: usages add up)."""

    state_transitions: int = 0  # Standard: billed each
    express_requests: int = 0
    express_gb_seconds: float = 0.0
    express_transitions: int = 0  # not billed (Express bills duration): shown to compare the two levels
    lambda_requests: int = 0
    lambda_gb_seconds: float = 0.0
    dynamodb_read_units: float = 0.0
    dynamodb_write_units: float = 0.0
    s3_puts: int = 0
    s3_gets: int = 0
    events_published: int = 0

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class CostEstimate:
    """Per billing line, the quantity used and its dollars; `total` is the dollars' sum."""

    quantities: dict[str, float]
    lines: dict[str, float]
    prices_as_of: str
    architecture: str

    @property
    def total(self) -> float:
        return sum(self.lines.values())


def estimate(usage: Usage, prices: Prices = PRICES, architecture: str = "arm64") -> CostEstimate:
    """Price a usage; `architecture` picks the Lambda GB-second price (the stack deploys arm64)."""
    priced = {  # billing line -> (quantity, dollars per unit)
        "step_functions": (usage.state_transitions, prices.state_transition),
        "express_requests": (usage.express_requests, prices.express_request),
        "express_duration": (usage.express_gb_seconds, prices.express_gb_second),
        "lambda_requests": (usage.lambda_requests, prices.lambda_request),
        "lambda_compute": (usage.lambda_gb_seconds, prices.lambda_gb_second(architecture)),
        "dynamodb_reads": (usage.dynamodb_read_units, prices.dynamodb_read_unit),
        "dynamodb_writes": (usage.dynamodb_write_units, prices.dynamodb_write_unit),
        "s3_puts": (usage.s3_puts, prices.s3_put),
        "s3_gets": (usage.s3_gets, prices.s3_get),
        "eventbridge": (usage.events_published, prices.event),
    }
    return CostEstimate(
        quantities={line: quantity for line, (quantity, _) in priced.items()},
        lines={line: quantity * price for line, (quantity, price) in priced.items()},
        prices_as_of=prices.as_of,
        architecture=architecture,
    )


# --------------------------------------------------------------------------- Lambda


def lambda_gb_seconds(duration_ms: float, memory_mb: int) -> float:
    """Lambda bills duration rounded up to the next millisecond, times the configured memory."""
    billed_ms = max(1, math.ceil(duration_ms))
    return billed_ms / 1000 * memory_mb / 1024


EXPRESS_MEMORY_CHUNK_GB = 64 / 1024


def express_gb_seconds(duration_ms: float, memory_bytes: int = 0) -> float:
    """Express bills duration rounded up to the next 100 ms, times the memory the execution used in
    64 MB chunks (its definition and its state: a segment's fit in the first chunk)."""
    billed_s = max(1, math.ceil(duration_ms / 100)) / 10
    chunks = max(1, math.ceil(memory_bytes / (64 * 1024 * 1024)))
    return billed_s * chunks * EXPRESS_MEMORY_CHUNK_GB


def billed_events(entry_bytes: int) -> int:
    """EventBridge bills each started 64 KB of a published entry as one event."""
    return max(1, math.ceil(entry_bytes / EVENT_CHUNK_BYTES))


# --------------------------------------------------------------------------- DynamoDB sizes

WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096


def item_size(item: Mapping[str, Mapping[str, Any]]) -> int:
    """Bytes of an item in DynamoDB's typed form ({"name": {"S": "..."}}): names plus values."""
    return sum(_utf8(name) + attribute_size(value) for name, value in item.items())


def attribute_size(value: Mapping[str, Any]) -> int:
    """Bytes of one typed value (without its name), by DynamoDB's published rules."""
    ((kind, data),) = value.items()
    if kind == "S":
        return _utf8(data)
    if kind == "N":
        return number_size(data)
    if kind == "B":
        return _binary(data)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(_utf8(s) for s in data)
    if kind == "NS":
        return sum(number_size(n) for n in data)
    if kind == "BS":
        return sum(_binary(b) for b in data)
    # a List or Map: 3 bytes of overhead, and 1 byte per element
    if kind == "L":
        return 3 + sum(1 + attribute_size(element) for element in data)
    if kind == "M":
        return 3 + sum(1 + _utf8(name) + attribute_size(element) for name, element in data.items())
    raise ValueError(f"unknown DynamoDB type {kind!r}")


def number_size(number: str | int | float) -> int:
    """1 byte per two significant digits (leading and trailing zeros trimmed) + 1 byte."""
    mantissa = str(number).lstrip("+-").lower().split("e")[0].replace(".", "")
    digits = len(mantissa.strip("0"))
    return math.ceil(digits / 2) + 1


def _utf8(text: str) -> int:
    return len(text.encode("utf-8"))


def _binary(data: bytes | bytearray | str) -> int:
    """Raw bytes count; text is DynamoDB's JSON wire form (base64), so its decoded length counts."""
    if isinstance(data, str):
        try:
            return len(base64.b64decode(data, validate=True))
        except binascii.Error:
            return _utf8(data)
    return len(data)


# --------------------------------------------------------------------------- DynamoDB units


def write_units(item_bytes: int, *, transactional: bool = False) -> int:
    """One unit per started KB of the item written (never less than one); transactions cost 2x.

    For an update or a delete, `item_bytes` is the larger of the item before and after."""
    units = max(1, math.ceil(item_bytes / WRITE_UNIT_BYTES))
    return 2 * units if transactional else units


def read_units(item_bytes: int, *, consistent: bool = False, transactional: bool = False) -> float:
    """One unit per started 4 KB (never less than one) for a strongly consistent read, half for
    an eventually consistent one, two for a transactional one. A Query or Scan is one read of
    the summed size of its items; GetItem and each BatchGetItem key are reads of one item."""
    units = max(1, math.ceil(item_bytes / READ_UNIT_BYTES))
    if transactional:
        return 2.0 * units
    return float(units) if consistent else units / 2
