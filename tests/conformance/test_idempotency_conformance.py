"""Idempotency-Key records, for every backend: Powertools' DynamoDB layer (in moto) and ours in memory.

A backend conforms when, through Powertools' `idempotent_function` as the API uses it: the first call
runs and its result is kept; the same key and payload returns the kept result without running; the
same key with another payload is refused; a key whose first call is still running is refused; a call
that raised keeps nothing; and an expired record is as good as none.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)

from missions.adapters.memory.idempotency import MemoryIdempotencyLayer
from missions.core.specs import IDEMPOTENCY
from tests.support.aws import use_fake_aws

REGION = "us-east-1"


@pytest.fixture(params=["memory", "dynamodb"])
def store(request, monkeypatch):
    if request.param == "memory":
        yield MemoryIdempotencyLayer()
        return
    import boto3
    from moto import mock_aws

    from missions.adapters.dynamodb.idempotency import UserIdempotencyLayer
    from missions.adapters.dynamodb.tables import table_definition

    use_fake_aws(monkeypatch)
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        client.create_table(**table_definition(IDEMPOTENCY, "test-idempotency"))
        yield UserIdempotencyLayer("test-idempotency", boto3_client=client)


def once(store: Any, work: Any, expires: int = 3600) -> Any:
    config = IdempotencyConfig(
        event_key_jmespath="key",
        payload_validation_jmespath="fingerprint",
        expires_after_seconds=expires,
        hash_function="sha256",
        raise_on_no_idempotency_key=True,
    )

    @idempotent_function(data_keyword_argument="request", persistence_store=store, config=config, key_prefix="op#u1")
    def run(request: dict[str, Any]) -> dict[str, Any]:
        return work(request)

    return run


def test_the_first_call_runs_and_a_replay_returns_its_result(store):
    calls: list[str] = []
    run = once(store, lambda r: calls.append(r["key"]) or {"n": len(calls)})
    assert run(request={"key": "k", "fingerprint": "a"}) == {"n": 1}
    assert run(request={"key": "k", "fingerprint": "a"}) == {"n": 1}
    assert calls == ["k"]


def test_the_same_key_with_another_payload_is_refused(store):
    run = once(store, lambda r: {"ok": True})
    run(request={"key": "k", "fingerprint": "a"})
    with pytest.raises(IdempotencyValidationError):
        run(request={"key": "k", "fingerprint": "b"})


def test_a_key_in_flight_is_refused(store):
    seen: list[type[Exception]] = []

    def work(request: dict[str, Any]) -> dict[str, Any]:
        try:
            inner(request={"key": "k", "fingerprint": "a"})
        except IdempotencyAlreadyInProgressError as exc:
            seen.append(type(exc))
        return {"ok": True}

    inner = once(store, lambda r: {"inner": True})
    outer = once(store, work)
    assert outer(request={"key": "k", "fingerprint": "a"}) == {"ok": True}
    assert seen == [IdempotencyAlreadyInProgressError]


def test_a_call_that_raised_keeps_nothing(store):
    attempts: list[int] = []

    def flaky(request: dict[str, Any]) -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("dependency down")
        return {"ok": True}

    run = once(store, flaky)
    with pytest.raises(RuntimeError):
        run(request={"key": "k", "fingerprint": "a"})
    assert run(request={"key": "k", "fingerprint": "a"}) == {"ok": True}
    assert len(attempts) == 2


def test_an_expired_record_is_as_good_as_none(store):
    calls: list[int] = []
    run = once(store, lambda r: calls.append(1) or {"n": len(calls)}, expires=1)
    run(request={"key": "k", "fingerprint": "a"})
    time.sleep(2.1)
    assert run(request={"key": "k", "fingerprint": "b"}) == {"n": 2}  # a new request, not a reuse
