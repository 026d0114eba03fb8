"""Email notices people opt in to: told when a mission needs them or finishes, only their own, and a notice
that cannot be sent never fails the function reporting the mission's state (in-memory adapters)."""

from __future__ import annotations

import logging

import pytest

from missions.adapters.memory.notifications import InMemoryNotifications
from missions.app.runtime import Runtime
from missions.core.mission.status import MissionStatus
from missions.core.notifications import Notice
from missions.service.control import ExecutionStatus
from missions.service.lifecycle import Lifecycle
from missions.service.notifications import NotificationService
from tests.support.api import _ask, _question, call, exchange, start
from tests.support.fakes import memory_runtime


@pytest.fixture()
def runtime() -> Runtime:
    active = memory_runtime()
    active.notifications = NotificationService(InMemoryNotifications(), active.memory)  # type: ignore[misc]
    return active


def topic(runtime: Runtime) -> InMemoryNotifications:
    found = runtime.notifications._notifications
    assert isinstance(found, InMemoryNotifications)
    return found


def test_an_opt_in_waits_for_the_address_to_confirm_then_tells_only_its_user(runtime: Runtime):
    # Given ann opts in: her address must confirm first
    status, settings = call(runtime, "PUT", "/me/notifications", {"email": "ann@example.org"})
    assert status == 200 and settings == {"email": "ann@example.org", "status": "pending_confirmation"}
    (subscription,) = topic(runtime).subscriptions
    topic(runtime).confirm(subscription)
    assert call(runtime, "GET", "/me/notifications")[1]["status"] == "on"
    assert call(runtime, "GET", "/me/notifications", user="bo")[1] == {"email": None, "status": "off"}
    # When her mission asks her something, and bo's asks him
    mine, theirs = start(runtime), start(runtime, user="bo")
    for mission_id in (mine, theirs):
        _ask(runtime, mission_id)
        _question(runtime, mission_id)
    # Then she is told, with the question; bo, who did not opt in, is not
    ((email, notice),) = topic(runtime).sent
    assert email == "ann@example.org" and notice.kind == "needs_you" and notice.mission_id == mine
    assert "which one?" in notice.text and notice.subject.startswith("A mission needs you")


def test_the_end_of_a_mission_is_told_and_a_cancel_is_not(runtime: Runtime):
    call(runtime, "PUT", "/me/notifications", {"email": "ann@example.org"})
    topic(runtime).confirm(next(iter(topic(runtime).subscriptions)))
    done, cancelled = start(runtime), start(runtime)
    Lifecycle(runtime.missions).end(done, MissionStatus.COMPLETED, result={"answer": "42"}, terminal_reason="completed")
    call(runtime, "POST", f"/missions/{cancelled}/cancel")
    for mission_id in (done, cancelled):
        runtime.control.execution_changed(ExecutionStatus(f"arn:x:{mission_id}", "SUCCEEDED"))
    assert [(n.kind, n.mission_id) for _, n in topic(runtime).sent] == [("finished", done)]
    assert "42" in topic(runtime).sent[0][1].text


@pytest.mark.parametrize("email", ["not an address", "a@b", "@example.org", "x" * 250 + "@example.org"])
def test_a_bad_address_is_422_and_nothing_is_subscribed(runtime: Runtime, email: str):
    assert call(runtime, "PUT", "/me/notifications", {"email": email})[0] == 422
    assert topic(runtime).subscriptions == {}
    assert call(runtime, "GET", "/me/notifications")[1]["status"] == "off"


def test_a_new_address_replaces_the_old_and_opting_out_stops_the_notices(runtime: Runtime):
    call(runtime, "PUT", "/me/notifications", {"email": "old@example.org"})
    call(runtime, "PUT", "/me/notifications", {"email": "new@example.org"})
    assert [email for _, email, _ in topic(runtime).subscriptions.values()] == ["new@example.org"]
    status, headers, _ = exchange(runtime, "DELETE", "/me/notifications")
    assert status == 204 and topic(runtime).subscriptions == {}
    assert call(runtime, "DELETE", "/me/notifications")[0] == 404


def test_a_notice_that_cannot_be_sent_is_logged_and_the_question_is_still_asked(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
):
    class Down(InMemoryNotifications):
        def publish(self, notice: Notice) -> None:
            raise ConnectionError("SNS is down")

    down = Down()
    runtime.notifications = NotificationService(down, runtime.memory)  # type: ignore[misc]
    call(runtime, "PUT", "/me/notifications", {"email": "ann@example.org"})
    down.confirm(next(iter(down.subscriptions)))
    mission_id = start(runtime)
    _ask(runtime, mission_id)
    with caplog.at_level(logging.WARNING):
        _question(runtime, mission_id)
    assert call(runtime, "GET", f"/missions/{mission_id}")[1]["status"] == "interrupted"
    assert "SNS is down" in caplog.text


def test_without_a_topic_opting_in_is_503_and_notices_are_skipped():
    runtime = memory_runtime()
    assert call(runtime, "PUT", "/me/notifications", {"email": "ann@example.org"})[0] == 503
    mission_id = start(runtime)
    _ask(runtime, mission_id)
    _question(runtime, mission_id)  # no topic: the question is asked all the same
