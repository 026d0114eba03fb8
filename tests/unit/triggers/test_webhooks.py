"""Webhook ingestion: every refusal, acceptance, replays, and the DynamoDB delivery store."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

import pytest

from missions.adapters.dynamodb.deliveries import DynamoDeliveryStore
from missions.adapters.memory.webhooks import InMemoryDeliveryStore, StaticWebhookSources
from missions.adapters.secrets import SecretsManagerWebhookSources
from missions.core.specs import DELIVERIES
from missions.ports.webhooks import WebhookSource
from missions.service.triggers.webhooks import Delivery, WebhookRejected, bus_event, sign, verify_delivery
from tests.support.aws import use_fake_aws

NOW = 1_700_000_000
KEY = b"a key of twenty-four byte"
SECRET = "whsec_" + base64.b64encode(KEY).decode()
SOURCES = StaticWebhookSources(
    {
        "github": WebhookSource("github", SECRET, user_id="u1"),
        "tiny": WebhookSource("tiny", SECRET, max_body_bytes=16),
    }
)


def headers(body: bytes, *, delivery: str = "d-1", timestamp: int | str = NOW, **extra: str) -> dict[str, str]:
    return {
        "webhook-id": delivery,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(SECRET, delivery, timestamp, body),
        **extra,
    }


def verify(
    body: bytes, hdrs: dict[str, Any], *, source: str = "github", store: Any = None, now: float = NOW
) -> Delivery:
    return verify_delivery(
        source_name=source,
        headers=hdrs,
        body=body,
        sources=SOURCES,
        deliveries=store if store is not None else InMemoryDeliveryStore(),
        now=now,
    )


def rejected(body: bytes, hdrs: dict[str, Any], **kwargs: Any) -> WebhookRejected:
    with pytest.raises(WebhookRejected) as caught:
        verify(body, hdrs, **kwargs)
    return caught.value


BODY = json.dumps({"type": "push", "ref": "main"}).encode()


# -- sign ------------------------------------------------------------------------------------


def test_sign_matches_an_independent_hmac():
    # Given a message id, a timestamp and a body / When signed
    value = sign(SECRET, "d-1", NOW, BODY)
    # Then it is v1, then the base64 HMAC-SHA256 of "<id>.<timestamp>.<body>" under the secret's key
    expected = hmac.new(KEY, b"d-1.1700000000." + BODY, hashlib.sha256).digest()
    assert value == "v1," + base64.b64encode(expected).decode()
    assert sign(KEY, "d-1", str(NOW), BODY) == value


def test_sign_reproduces_the_standard_webhooks_example():
    # The example of the Standard Webhooks reference implementations: senders built on them interoperate
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    signature = sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}')
    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


# -- accepted --------------------------------------------------------------------------------


def test_a_signed_delivery_is_accepted_with_the_sources_user():
    # Given a correctly signed delivery / When verified
    delivery = verify(BODY, headers(BODY))
    # Then the payload, event type (from the body) and the source's user come back
    assert delivery == Delivery("github", "d-1", "push", {"type": "push", "ref": "main"}, "u1", duplicate=False)


def test_the_event_type_is_the_signed_bodys_never_an_unsigned_header():
    # Given a delivery with a header naming another event type (the old, unsigned x-missions-event)
    delivery = verify(BODY, headers(BODY, **{"x-missions-event": "release"}))
    # Then the type is the body's, which the signature covers
    assert delivery.event_type == "push"


def test_header_names_are_case_insensitive():
    # Given headers spelled as API Gateway v1 passes them through
    hdrs = {k.upper(): v for k, v in headers(BODY).items()}
    # When / Then they are read all the same
    assert verify(BODY, hdrs).delivery_id == "d-1"


def test_a_body_without_type_has_an_empty_event_type():
    body = b'{"a": 1}'
    assert verify(body, headers(body)).event_type == ""


def test_timestamps_at_the_edge_of_the_window_are_accepted():
    assert verify(BODY, headers(BODY), now=NOW + 300).delivery_id == "d-1"
    assert verify(BODY, headers(BODY), now=NOW - 300).delivery_id == "d-1"


# -- replays ---------------------------------------------------------------------------------


def test_a_replayed_delivery_is_a_duplicate():
    # Given a store that saw the delivery
    store = InMemoryDeliveryStore()
    first = verify(BODY, headers(BODY), store=store)
    # When the same delivery arrives again
    again = verify(BODY, headers(BODY), store=store)
    # Then it is marked duplicate (answer 200, start nothing)
    assert (first.duplicate, again.duplicate) == (False, True)
    assert again.payload == first.payload


def test_the_same_id_from_another_source_is_not_a_duplicate():
    store = InMemoryDeliveryStore()
    assert not verify(b"{}", headers(b"{}"), store=store).duplicate
    assert not verify(b"{}", headers(b"{}"), store=store, source="tiny").duplicate


def test_a_bad_signature_does_not_consume_the_delivery_id():
    # Given a forged delivery reusing an id the real sender will use
    store = InMemoryDeliveryStore()
    forged = {**headers(BODY), "webhook-signature": sign(b"wrong", "d-1", NOW, BODY)}
    assert rejected(BODY, forged, store=store).status == 401
    # When the real delivery arrives / Then it is accepted, not a duplicate
    assert verify(BODY, headers(BODY), store=store).duplicate is False


def test_a_non_object_body_does_not_consume_the_delivery_id():
    store = InMemoryDeliveryStore()
    assert rejected(b"[1]", headers(b"[1]"), store=store).status == 400
    assert verify(BODY, headers(BODY), store=store).duplicate is False


def test_forget_lets_the_sender_retry():
    store = InMemoryDeliveryStore()
    assert store.remember("d", "s") is True
    store.forget("d", "s")
    assert store.remember("d", "s") is True
    assert store.remember("d", "s") is False


# -- refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["gitlab", "", "GitHub", "../etc"])
def test_an_unknown_source_is_404(source: str):
    assert rejected(BODY, headers(BODY), source=source).status == 404


def test_a_body_over_the_sources_limit_is_413():
    body = b'{"x": "' + b"a" * 20 + b'"}'
    assert rejected(body, headers(body), source="tiny").status == 413


@pytest.mark.parametrize("header", ["webhook-timestamp", "webhook-id", "webhook-signature"])
def test_a_missing_header_is_401(header: str):
    hdrs = headers(BODY)
    del hdrs[header]
    error = rejected(BODY, hdrs)
    assert (error.status, header in error.reason) == (401, True)


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("webhook-timestamp", "yesterday"),
        ("webhook-timestamp", "-5"),
        ("webhook-timestamp", "1700000000.5"),
        ("webhook-timestamp", "1e9"),
        ("webhook-id", "has space"),
        ("webhook-id", "x" * 129),
        ("webhook-id", "semi;colon"),
        ("webhook-signature", "sha256=" + "0" * 64),  # the scheme before Standard Webhooks
        ("webhook-signature", "v1"),
        ("webhook-signature", "v1,"),
        ("webhook-signature", "v1,not base64!"),
        ("webhook-signature", "v1," + base64.b64encode(b"short").decode()),
        ("webhook-signature", "v2," + base64.b64encode(b"x" * 32).decode()),
    ],
)
def test_a_malformed_header_is_401(header: str, value: str):
    error = rejected(BODY, {**headers(BODY), header: value})
    assert (error.status, header in error.reason) == (401, True)


@pytest.mark.parametrize("skew", [301, -301, 86_400])
def test_a_stale_timestamp_is_401(skew: int):
    # Given a delivery signed too long ago (or in the future), correctly signed
    hdrs = headers(BODY, timestamp=NOW - skew)
    # When / Then
    error = rejected(BODY, hdrs)
    assert (error.status, error.reason) == (401, "stale timestamp")


def test_a_bad_signature_is_401():
    # Given a body altered after signing
    hdrs = headers(BODY)
    error = rejected(BODY.replace(b"main", b"evil"), hdrs)
    assert (error.status, error.reason) == (401, "bad signature")


def test_a_signature_for_another_timestamp_is_401():
    hdrs = {**headers(BODY), "webhook-timestamp": str(NOW + 1)}
    assert rejected(BODY, hdrs).reason == "bad signature"


def test_a_captured_delivery_replayed_under_a_fresh_id_is_401():
    # Given a delivery accepted once, captured with its signature
    store = InMemoryDeliveryStore()
    captured = headers(BODY, delivery="d-1")
    assert verify(BODY, captured, store=store).duplicate is False
    # When it is replayed within the window under ids never seen, with the same signature
    for fresh in ("d-2", "d-1-again", "msg_other"):
        error = rejected(BODY, {**captured, "webhook-id": fresh}, store=store)
        # Then each is refused: the id is part of what is signed
        assert (error.status, error.reason) == (401, "bad signature")
    # and none of those ids was used up
    assert store.remember("d-2", "github") is True


def test_a_valid_delivery_is_accepted_once_and_its_identical_redelivery_is_a_duplicate():
    # Given one signed delivery / When it arrives twice, byte for byte
    store = InMemoryDeliveryStore()
    first, again = verify(BODY, headers(BODY), store=store), verify(BODY, headers(BODY), store=store)
    # Then the first is accepted and the second is a duplicate of the same id
    assert (first.duplicate, again.duplicate, again.delivery_id) == (False, True, "d-1")


def test_any_one_of_several_signatures_may_match():
    # Given a sender rotating its secret: an old-key signature, one of another version, then the valid one
    valid = sign(SECRET, "d-1", NOW, BODY)
    other = sign(b"the previous key", "d-1", NOW, BODY)
    hdrs = {**headers(BODY), "webhook-signature": f"{other} v1a,c2lnbmF0dXJl {valid}"}
    # When / Then it is accepted
    assert verify(BODY, hdrs).delivery_id == "d-1"
    # but only signatures under the source's key count
    assert rejected(BODY, {**hdrs, "webhook-signature": other}).reason == "bad signature"


def test_a_body_that_is_not_utf8_is_400_before_the_id_is_used():
    # Given well-formed headers and a body that is not UTF-8 (the spec signs text, so none can be signed)
    store = InMemoryDeliveryStore()
    hdrs = headers(b"{}")
    # When / Then it is refused as the sender's mistake, not a server error, and the id stays unused
    assert rejected(b'{"x": "\xff"}', hdrs, store=store).status == 400
    assert store.remember("d-1", "github") is True


@pytest.mark.parametrize("body", [b"[]", b'"text"', b"42", b"not json", b'{"x": NaN}', b""])
def test_a_body_that_is_not_a_json_object_is_400(body: bytes):
    assert rejected(body, headers(body)).status == 400


def test_a_payload_too_big_for_the_event_bus_is_413_before_the_id_is_used():
    # Given a source accepting large bodies and a body that escapes to more than 256 KB
    sources = StaticWebhookSources({"big": WebhookSource("big", SECRET, max_body_bytes=1024 * 1024)})
    body = json.dumps({"x": "\n" * 200_000}).encode()
    store = InMemoryDeliveryStore()
    with pytest.raises(WebhookRejected) as caught:
        verify_delivery(source_name="big", headers=headers(body), body=body, sources=sources, deliveries=store, now=NOW)
    assert caught.value.status == 413
    assert store.remember("d-1", "big") is True


# -- the bus entry ---------------------------------------------------------------------------


def test_bus_event_carries_the_delivery():
    delivery = verify(BODY, headers(BODY))
    entry = bus_event(delivery, event_bus_name="bus")
    assert (entry["Source"], entry["DetailType"], entry["EventBusName"]) == (
        "missions.webhook",
        "webhook.github",
        "bus",
    )
    assert json.loads(entry["Detail"]) == {
        "delivery_id": "d-1",
        "source": "github",
        "event_type": "push",
        "user_id": "u1",
        "payload": {"type": "push", "ref": "main"},
    }
    assert "EventBusName" not in bus_event(delivery)


def test_the_bus_source_constant_agrees_with_trigger_rules():
    from missions.core.triggers import specs as trigger_specs
    from missions.service.triggers import webhooks as webhooks

    assert webhooks.BUS_SOURCE == trigger_specs.WEBHOOK_SOURCE


# -- sources ---------------------------------------------------------------------------------


def test_sources_come_from_the_settings_model_only():
    # Given webhook sources in the one settings model (MISSIONS_WEBHOOK_SOURCES)
    from missions.app.runtime import Runtime
    from missions.core.settings import RuntimeSettings

    env = {
        "MISSIONS_MISSIONS_TABLE": "m-missions",
        "MISSIONS_CHECKPOINTS_TABLE": "m-checkpoints",
        "MISSIONS_EVENTS_TABLE": "m-events",
        "MISSIONS_INTERRUPTS_TABLE": "m-interrupts",
        "MISSIONS_BLOB_BUCKET": "m-blobs",
        "MISSIONS_WEBHOOK_SOURCES": json.dumps(
            {"stripe": {"secret": SECRET, "user_id": "ops"}, "ci": {"secret": SECRET}}
        ),
    }
    # When the runtime builds its sources
    sources = Runtime(RuntimeSettings.from_env(env)).webhook_sources
    # Then each is read as configured, the user defaulting to "system"
    assert sources.get("stripe") == WebhookSource("stripe", SECRET, user_id="ops")
    assert sources.get("ci") == WebhookSource("ci", SECRET, user_id="system")
    assert sources.get("other") is None


@pytest.mark.parametrize(
    "config",
    [
        {"user_id": "x"},
        {"secret": ""},
        {"secret": 5},
        {"secret": "s3cret"},  # not whsec_<base64>
        {"secret": "whsec_"},  # an empty key
        {"secret": "whsec_not base64!"},
    ],
)
def test_a_source_without_a_usable_secret_fails_clearly(config: dict[str, object]):
    with pytest.raises(ValueError, match="secret") as caught:
        WebhookSource.from_config("a", config)
    assert "'a'" in str(caught.value)


def test_a_malformed_secret_is_not_repeated_in_the_error():
    with pytest.raises(ValueError) as caught:
        WebhookSource("a", "whsec_Zm9vYmFy*typo")
    assert "Zm9vYmFy" not in str(caught.value)


def test_the_secret_is_not_in_the_repr():
    assert SECRET not in repr(WebhookSource("github", SECRET))


class _NotFound(Exception):
    response = {"Error": {"Code": "ResourceNotFoundException"}}


def test_secrets_manager_sources_read_prefix_slash_name_and_cache_misses():
    # Given a fake secret provider holding one source
    calls: list[str] = []

    def fetch(secret_id: str) -> Any:
        calls.append(secret_id)
        if secret_id == "missions/webhooks/github":
            return {"secret": SECRET, "user_id": "u9"}
        raise _NotFound()

    sources = SecretsManagerWebhookSources("missions/webhooks/", fetch=fetch)
    # When sources are looked up
    found = sources.get("github")
    missing = [sources.get("nope"), sources.get("nope"), sources.get("../x")]
    # Then the secret id is prefix/name, misses are cached, and odd names never reach the provider
    assert found == WebhookSource("github", SECRET, user_id="u9")
    assert missing == [None, None, None]
    assert calls == ["missions/webhooks/github", "missions/webhooks/nope"]


def test_secrets_manager_errors_other_than_not_found_propagate():
    def fetch(secret_id: str) -> Any:
        raise RuntimeError("throttled")

    with pytest.raises(RuntimeError):
        SecretsManagerWebhookSources("p", fetch=fetch).get("github")


@pytest.mark.parametrize(
    ("stored", "problem"),
    [
        ("s3cret-of-2023", "not JSON"),  # a bare key, as sources were once stored
        ('{"hmac_secret": "s3cret-of-2023", "user": "ops"}', "has no secret"),  # an older field name
        ('{"secret": "s3cret-of-2023", "user_id": "ops"}', "whsec_<base64>"),  # not a Standard Webhooks secret
        ('"whsec_czNjcmV0"', "JSON str, not an object"),
    ],
)
def test_a_source_stored_in_an_old_format_is_a_503_naming_the_format_and_logged(
    stored: str, problem: str, caplog: pytest.LogCaptureFixture
):
    from missions.service.triggers.ingest import receive_webhook

    # Given a source whose secret an operator stored before sources were {"secret": "whsec_...", ...}
    sources = SecretsManagerWebhookSources("missions/webhooks", fetch=lambda secret_id: stored)
    bus = _Bus()
    body = b'{"type": "push"}'
    event = {"pathParameters": {"source": "legacy"}, "headers": headers(body), "body": body.decode()}
    # When a delivery for it arrives
    with caplog.at_level("ERROR"):
        response = receive_webhook(event, sources=sources, deliveries=InMemoryDeliveryStore(), bus=bus, now=lambda: NOW)
    # Then it is a 503 (the sender retries once the operator fixed it) whose reason names the source, what is
    # wrong and the format it must have, the same line is logged as an error, and nothing reached the bus
    assert response["statusCode"] == 503, response
    reason = json.loads(response["body"])["message"]
    assert "webhook source 'legacy' is misconfigured" in reason and problem in reason
    assert '{"secret": "whsec_<base64>", "user_id": "..."}' in reason
    assert "s3cret-of-2023" not in reason and "s3cret-of-2023" not in caplog.text
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [reason]
    assert bus.published == []


class _Bus:
    def __init__(self) -> None:
        self.published: list[dict[str, Any]] = []

    def publish(self, entries: list[dict[str, Any]]) -> None:
        self.published += entries


# -- DynamoDB --------------------------------------------------------------------------------


@pytest.fixture
def dynamodb(monkeypatch: pytest.MonkeyPatch):
    use_fake_aws(monkeypatch)
    import boto3
    from moto import mock_aws

    from missions.adapters.dynamodb.tables import table_definition

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(**table_definition(DELIVERIES, "deliveries"))
        yield client


def test_dynamo_delivery_store_remembers_once_per_source(dynamodb: Any):
    # Given the deliveries table
    store = DynamoDeliveryStore("deliveries", client=dynamodb, ttl_seconds=60)
    # When ids are remembered / Then each (source, id) only once
    assert store.remember("d-1", "github") is True
    assert store.remember("d-1", "github") is False
    assert store.remember("d-1", "stripe") is True
    item = dynamodb.get_item(TableName="deliveries", Key={"delivery_id": {"S": "github#d-1"}})["Item"]
    assert item["source"] == {"S": "github"}
    assert int(item["expires_at"]["N"]) - int(item["received_at"]["N"]) == 60


def test_dynamo_delivery_store_forgets_and_ignores_expired_items(dynamodb: Any):
    store = DynamoDeliveryStore("deliveries", client=dynamodb)
    assert store.remember("d-2", "github") is True
    store.forget("d-2", "github")
    assert store.remember("d-2", "github") is True
    # an item past its expiry that TTL has not deleted yet counts as absent
    dynamodb.put_item(
        TableName="deliveries",
        Item={"delivery_id": {"S": "github#old"}, "source": {"S": "github"}, "expires_at": {"N": "1"}},
    )
    assert store.remember("old", "github") is True


def test_dynamo_delivery_store_in_verify_delivery(dynamodb: Any):
    store = DynamoDeliveryStore("deliveries")  # the client is created lazily, from the environment
    assert verify(BODY, headers(BODY), store=store).duplicate is False
    assert verify(BODY, headers(BODY), store=store).duplicate is True


def test_dynamo_delivery_store_propagates_other_errors():
    class Broken:
        def put_item(self, **kwargs: Any) -> None:
            raise RuntimeError("network")

    with pytest.raises(RuntimeError):
        DynamoDeliveryStore("t", client=Broken()).remember("d", "s")


def test_importing_webhooks_imports_no_boto3():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    code = "import sys; sys.path[:0] = ['shared', '.']; import missions.service.triggers.webhooks; assert 'boto3' not in sys.modules"  # noqa: E501
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
