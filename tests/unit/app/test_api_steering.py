"""Steering missions through the HTTP API: cancel, feedback, forks, questions and answers, event pages. The HTTP API
over the composition root on in-memory adapters, with no AWS and no moto.
"""

from __future__ import annotations

import base64

from missions.app.runtime import Runtime
from missions.core.mission.events import Event, EventType
from missions.core.mission.status import MissionStatus
from missions.ports.checkpoints import Checkpoint
from missions.service.interrupts import record_interrupt
from missions.service.lifecycle import Lifecycle
from tests.support.api import GOAL, _ask, _question, call, exchange, executions, start


def test_cancel_then_cancel_again_is_a_conflict(runtime: Runtime):
    mission_id = start(runtime)
    assert call(runtime, "POST", f"/missions/{mission_id}/cancel") == (
        200,
        {"mission_id": mission_id, "status": "cancelled"},
    )
    assert executions(runtime).stopped == [mission_id]
    status, body = call(runtime, "POST", f"/missions/{mission_id}/cancel")
    assert status == 409 and "cancelled" in body["message"]


def test_feedback_waits_for_the_end_then_is_taken_once(runtime: Runtime):
    mission_id = start(runtime)
    status, body = call(runtime, "POST", f"/missions/{mission_id}/feedback", {"completed": True, "quality": 4})
    assert status == 409 and "still running" in body["message"]
    Lifecycle(runtime.missions).end(mission_id, MissionStatus.COMPLETED, terminal_reason="completed")
    assert call(runtime, "POST", f"/missions/{mission_id}/feedback", {"completed": True, "quality": 4})[0] == 200
    assert call(runtime, "POST", f"/missions/{mission_id}/feedback", {"completed": False})[0] == 409


def test_a_running_mission_is_shown_where_its_last_stage_sent_it_and_cancelling_keeps_that(runtime: Runtime):
    # Given a running mission whose stage `present` committed (its checkpoint holds the progress)
    mission_id = start(runtime)
    progress = {"stage": "present", "next_stage": "checkout", "phase": "executing", "counters": {"agent_hops": 2}}
    runtime.checkpoints.put(
        Checkpoint(
            thread_id=mission_id, checkpoint_id="0002-present", parent_id=None, stage="present", envelope={}
        ).model_copy(update={"progress": {**progress, "counters": {"agent_hops": 2, "cost_usd": 0.004}}})
    )
    # When it is read and listed, Then both show the stage that ran, the one running now and the cost so far
    mission = call(runtime, "GET", f"/missions/{mission_id}")[1]
    assert (mission["stage"], mission["running_stage"], mission["cost_usd"]) == ("present", "checkout", 0.004)
    listed = call(runtime, "GET", "/missions")[1]["missions"][0]
    assert (listed["stage"], listed["running_stage"]) == ("present", "checkout")
    # and once cancelled, its record keeps where it got to
    assert call(runtime, "POST", f"/missions/{mission_id}/cancel")[0] == 200
    record = runtime.missions.get(mission_id)
    assert (record.status, record.stage, record.cost_usd) == (MissionStatus.CANCELLED, "present", 0.004)


def test_a_fork_from_a_checkpoint_is_dispatched(runtime: Runtime):
    source = start(runtime)
    status, body = call(runtime, "POST", f"/missions/{source}/fork", {"checkpoint_id": "0001-start"})
    assert status == 202 and body["status"] == "started" and body["forked_from"] == source
    assert executions(runtime).started == [source, body["mission_id"]]
    status, body = call(runtime, "POST", f"/missions/{source}/fork", {"checkpoint_id": "0042-nowhere"})
    assert status == 404


def test_a_question_is_shown_only_once_it_can_be_answered(runtime: Runtime):
    # Given a stage that just asked, before the interrupt function stored the token
    mission_id = start(runtime)
    interrupt_id = _ask(runtime, mission_id)
    # Then the mission shows no question yet, and an early answer is told to retry (never 404)
    assert call(runtime, "GET", f"/missions/{mission_id}")[1]["pending_interrupt"] is None
    status, headers, body = exchange(
        runtime, "POST", f"/missions/{mission_id}/interrupts/{interrupt_id}", {"decision": "A"}
    )
    assert status == 409 and headers["retry-after"] == "1" and "not answerable yet" in body["message"]
    # When the token is stored but the mission is not marked waiting yet (the function's next write)
    interrupt = {"id": interrupt_id, "kind": "choice", "stage": "present", "question": "which one?", "options": ["A"]}
    stored = {"envelope": {"mission_id": mission_id, "interrupt": interrupt}, "task_token": "t"}
    record_interrupt(stored, runtime.interrupts)
    # Then an answer is told to retry, and is not taken (taken, it would have had no waiting mission to resume)
    status, headers, body = exchange(
        runtime, "POST", f"/missions/{mission_id}/interrupts/{interrupt_id}", {"decision": "A"}
    )
    assert status == 409 and headers["retry-after"] == "1" and "not answerable yet" in body["message"]
    assert runtime.interrupts.get(mission_id, interrupt_id).status == "pending"
    assert runtime.missions.get(mission_id).status == MissionStatus.RUNNING
    # When the mission is marked waiting / Then the question shows and takes the answer
    _question(runtime, mission_id)
    assert call(runtime, "GET", f"/missions/{mission_id}")[1]["pending_interrupt"]["question"] == "which one?"
    assert call(runtime, "POST", f"/missions/{mission_id}/interrupts/{interrupt_id}", {"decision": "A"})[0] == 200


def test_missions_waiting_for_a_human_hold_no_running_slot(runtime: Runtime):
    # Given three missions, each waiting for an answer
    waiting = [start(runtime) for _ in range(3)]
    for mission_id in waiting:
        _question(runtime, mission_id, token=f"t-{mission_id}")
    # When the user starts a fourth / Then it starts at once
    status, body = call(runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL})
    assert body["status"] == "started"
    assert runtime.launcher.dispatcher.running("ann") == {body["mission_id"]}


def test_an_answer_waits_for_a_slot_and_a_queued_mission_says_where_it_stands(runtime: Runtime):
    # Given a mission waiting for an answer, then three running ones filling the user's slots, and a 5th
    asking = start(runtime)
    _question(runtime, asking, token="t-asking")
    running = [start(runtime) for _ in range(3)]
    status, body = call(runtime, "POST", "/missions", {"capability": "shopping", "goal": GOAL})
    queued = body["mission_id"]
    assert body["status"] == "queued"
    place = call(runtime, "GET", f"/missions/{queued}")[1]["queue"]
    assert place == {"position": 1, "reason": "3 of your 3 running slots are in use"}
    # When the user answers the waiting one
    status, body = call(runtime, "POST", f"/missions/{asking}/interrupts/i_1", {"decision": "B"})
    # Then the answer is queued (first in line: it resumes before new starts), and nothing over the limit runs
    assert (status, body["status"]) == (200, "queued")
    assert call(runtime, "GET", f"/missions/{asking}")[1]["queue"]["position"] == 1
    assert executions(runtime).answered == []
    # When a running one ends / Then the answer is handed over first
    Lifecycle(runtime.missions).end(running[0], MissionStatus.COMPLETED, terminal_reason="completed")
    runtime.control.execution_ended(f"x:{running[0]}", "SUCCEEDED")
    assert [token for token, _ in executions(runtime).answered] == ["t-asking"]
    assert runtime.missions.get(asking).status == MissionStatus.RUNNING
    assert runtime.missions.get(queued).status == MissionStatus.QUEUED


def test_an_answer_resumes_the_execution_once(runtime: Runtime):
    mission_id = start(runtime)
    interrupt_id = _question(runtime, mission_id)
    status, body = call(runtime, "GET", f"/missions/{mission_id}")
    assert body["pending_interrupt"]["options"] == ["A", "B"] and body["status"] == "interrupted"
    path = f"/missions/{mission_id}/interrupts/{interrupt_id}"
    assert call(runtime, "POST", path, {"decision": "C"})[0] == 422  # not one of the options
    assert call(runtime, "POST", path, {"decision": "B"}) == (200, {"interrupt_id": interrupt_id, "status": "answered"})
    assert call(runtime, "POST", path, {"decision": "A"})[0] == 409  # asked once, answered once
    assert [output["response"]["decision"] for _, output in executions(runtime).answered] == ["B"]
    assert call(runtime, "POST", f"/missions/{mission_id}/interrupts/i_404", {"decision": "A"})[0] == 404


def test_an_answer_the_execution_no_longer_takes_is_a_conflict_and_recorded_as_expired(runtime: Runtime):
    mission_id = start(runtime)
    interrupt_id = _question(runtime, mission_id, token="late")
    executions(runtime).gone_tokens.add("late")  # it timed out
    status, body = call(runtime, "POST", f"/missions/{mission_id}/interrupts/{interrupt_id}", {"decision": "A"})
    assert status == 409 and "can no longer be answered" in body["message"]
    assert runtime.interrupts.get(mission_id, interrupt_id).status == "expired"
    _, events = call(runtime, "GET", f"/missions/{mission_id}/events")
    assert [e["type"] for e in events["events"]][-2:] == ["interrupt.answered", "interrupt.expired"]


def test_event_pages_stop_and_resume_inside_a_stages_batch(runtime: Runtime):
    # Given a mission whose stage wrote five events in one batch
    mission_id = start(runtime)
    _, before = call(runtime, "GET", f"/missions/{mission_id}/events")
    stage = [Event(type=EventType.TOOL_COMPLETED, mission_id=mission_id, payload={"n": n}) for n in range(5)]
    runtime.events.append(mission_id, "0001-traverser", stage)
    # When its events are paged two at a time from where the client was
    seen, cursor = [], before["cursor"]
    while True:
        after = f"&after={cursor}" if cursor else ""
        status, page = call(runtime, "GET", f"/missions/{mission_id}/events?limit=2{after}")
        assert status == 200 and len(page["events"]) <= 2
        if not page["events"]:
            break
        seen += [e["payload"]["n"] for e in page["events"]]
        cursor = page["cursor"]
    # Then every event of the batch came once, in order, across pages that cut it
    assert seen == [0, 1, 2, 3, 4]


def test_a_cursor_that_names_no_event_is_refused(runtime: Runtime):
    mission_id = start(runtime)
    for cursor in (base64.urlsafe_b64encode(b"zzz").decode(), "not base64!", base64.urlsafe_b64encode(b"e1").decode()):
        assert call(runtime, "GET", f"/missions/{mission_id}/events?after={cursor}")[0] == 422
