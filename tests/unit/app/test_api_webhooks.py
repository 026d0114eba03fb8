"""Webhooks and answers through the HTTP API when a dependency is down: nothing lost, nothing started twice. The
HTTP API over the composition root on in-memory adapters, with no AWS and no moto.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest

from missions.app.runtime import Runtime
from missions.core.errors import (
    DependencyUnavailable,
)
from missions.core.mission.status import MissionStatus
from missions.local.devserver import http_event
from tests.support.api import _question, call, exchange, executions, start
from tests.support.fakes import memory_runtime

WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"the git source's key, 32 bytes!").decode()


def _webhook_runtime(repo: Any, outage: list[Exception] | None = None) -> tuple[Runtime, list[dict[str, Any]]]:
    """A runtime with the `git` source (missions for ann, on the repository `repo`) whose bus hands each
    entry to the trigger function, as the EventBridge rule does; `outage` refuses the first publishes."""
    from missions.adapters.memory.webhooks import StaticWebhookSources
    from missions.ports.webhooks import WebhookSource

    runtime = memory_runtime(repo_roots=[str(repo)])
    runtime.webhook_sources = StaticWebhookSources({"git": WebhookSource("git", WEBHOOK_SECRET, user_id="ann")})
    published: list[dict[str, Any]] = []
    refusals = outage if outage is not None else []

    class Bus:
        def publish(self, entries: list[dict[str, Any]]) -> None:
            if refusals:
                raise refusals.pop()
            published.extend(entries)
            for entry in entries:
                runtime.ingest.bus_event(
                    {
                        "source": entry["Source"],
                        "detail-type": entry["DetailType"],
                        "detail": json.loads(entry["Detail"]),
                    }
                )

    runtime.bus = Bus()
    return runtime, published


def _webhook(delivery: str, body: bytes, stamp: int | None = None, signature: str | None = None) -> dict[str, Any]:
    from missions.service.triggers.webhooks import sign

    stamp = int(time.time()) if stamp is None else stamp
    headers = {
        "webhook-id": delivery,
        "webhook-timestamp": str(stamp),
        "webhook-signature": signature or sign(WEBHOOK_SECRET, delivery, stamp, body),
        "content-type": "application/json",
    }
    return http_event("POST", "/webhooks/git", "", headers, body, None)


PUSH = json.dumps({"type": "push", "symbol": "compute_tax"}).encode()


def test_a_webhook_survives_a_bus_outage_and_starts_its_mission_once(tmp_path: Any):
    # Given a signed delivery, and an event bus that refuses it once
    runtime, published = _webhook_runtime(
        tmp_path, outage=[DependencyUnavailable("the event bus refused the events: throttled")]
    )
    event = _webhook("d-1", PUSH)
    # When the sender delivers it, and retries after the 503 as it is told to
    first = runtime.ingest.webhook(event)
    second = runtime.ingest.webhook(event)
    third = runtime.ingest.webhook(event)
    # Then the retry was accepted (not refused as a replay), put on the bus once, and a replay after that is one
    assert (first["statusCode"], second["statusCode"], third["statusCode"]) == (503, 202, 200)
    assert len(published) == 1 and json.loads(published[0]["Detail"])["delivery_id"] == "d-1"
    assert len(runtime.missions.list_for_user("ann")) == 1


def test_a_captured_webhook_replayed_under_fresh_ids_starts_nothing(tmp_path: Any):
    # Given a signed delivery that started ann's mission
    runtime, published = _webhook_runtime(tmp_path)
    captured = _webhook("d-1", PUSH)
    assert runtime.ingest.webhook(captured)["statusCode"] == 202
    signature = captured["headers"]["webhook-signature"]
    stamp = int(captured["headers"]["webhook-timestamp"])
    # When someone who captured it replays it within the window under new ids, with its signature
    replays = [runtime.ingest.webhook(_webhook(fresh, PUSH, stamp, signature)) for fresh in ("d-2", "d-3")]
    # Then each is refused as unsigned, and still only one mission exists
    assert [(r["statusCode"], json.loads(r["body"])["message"]) for r in replays] == [(401, "bad signature")] * 2
    assert len(published) == 1 and len(runtime.missions.list_for_user("ann")) == 1


def test_a_stale_webhook_is_refused_and_an_identical_redelivery_is_a_duplicate(tmp_path: Any):
    runtime, _ = _webhook_runtime(tmp_path)
    # Given a delivery correctly signed six minutes ago / When delivered / Then refused, nothing started
    stale = runtime.ingest.webhook(_webhook("d-old", PUSH, stamp=int(time.time()) - 360))
    assert (stale["statusCode"], json.loads(stale["body"])["message"]) == (401, "stale timestamp")
    assert runtime.missions.list_for_user("ann") == []
    # Given a fresh delivery / When it arrives twice, byte for byte
    event = _webhook("d-new", PUSH)
    first, again = runtime.ingest.webhook(event), runtime.ingest.webhook(event)
    # Then it is accepted once, the second answered as a duplicate (2xx), and one mission started
    assert (first["statusCode"], again["statusCode"]) == (202, 200)
    assert json.loads(again["body"]) == {"duplicate": True, "delivery_id": "d-new"}
    assert len(runtime.missions.list_for_user("ann")) == 1


def test_an_answer_that_meets_an_outage_is_not_lost(runtime: Runtime, monkeypatch: pytest.MonkeyPatch):
    # Given a question, and Step Functions throttling the first hand-over of its answer
    mission_id = start(runtime)
    interrupt_id = _question(runtime, mission_id)
    fake = executions(runtime)
    send = fake.send_success
    refusals = [DependencyUnavailable("Step Functions is unavailable (ThrottlingException)")]

    def throttled(token: str, output: str) -> None:
        if refusals:
            raise refusals.pop()
        send(token, output)

    monkeypatch.setattr(fake, "send_success", throttled)
    path = f"/missions/{mission_id}/interrupts/{interrupt_id}"
    # When the user answers / Then 503 says retry, and the question is still open (not "answered")
    status, headers, body = exchange(runtime, "POST", path, {"decision": "A"})
    assert status == 503 and headers["retry-after"]
    assert runtime.interrupts.get(mission_id, interrupt_id).status == "pending"
    assert call(runtime, "GET", f"/missions/{mission_id}")[1]["pending_interrupt"]["interrupt_id"] == interrupt_id
    # When the client retries / Then the answer reaches the execution, once, and the mission runs again
    assert call(runtime, "POST", path, {"decision": "A"}) == (200, {"interrupt_id": interrupt_id, "status": "answered"})
    assert len(fake.answered) == 1 and runtime.missions.get(mission_id).status == MissionStatus.RUNNING
    _, events = call(runtime, "GET", f"/missions/{mission_id}/events")
    assert [e["type"] for e in events["events"]].count("interrupt.answered") == 1
