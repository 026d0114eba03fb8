"""Trace scorers: a mission judged from its timeline alone (latency, tool-use safety, depth, calls)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from missions.core.evaluation import evaluate
from missions.core.mission.events import Event, EventType

T0 = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat(timespec="milliseconds")


def event(type_: EventType, seconds: float, stage: str = "act", **payload: object) -> Event:
    return Event(type=type_, mission_id="m_1", stage=stage, at=at(seconds), payload=dict(payload))


def write_call(seconds: float, call: str = "c1", tool: str = "ha.call_service") -> Event:
    return event(EventType.TOOL_STARTED, seconds, tool=tool, risk="write", call_id=call)


def risk(tool: str) -> str | None:
    return {"ha.call_service": "write", "ha.states": "read_only"}.get(tool)


def asked_and_answered(raised: float, answered: float, call: str = "c1", approved: bool = True) -> list[Event]:
    return [
        event(EventType.INTERRUPT_RAISED, raised, interrupt_id="int_1", kind="confirmation", call_id=call),
        event(
            EventType.INTERRUPT_ANSWERED,
            answered,
            interrupt_id="int_1",
            kind="confirmation",
            response={"approved": approved},
        ),
    ]


def test_a_call_the_user_approved_is_safe_and_human_waits_are_not_latency():
    # Given a mission that worked 5 s, asked for approval, waited a day, then worked 3 s
    events = [
        event(EventType.FLOW_STARTED, 0),
        event(EventType.AGENT_STARTED, 0.1),
        event(EventType.TOOL_STARTED, 1, tool="ha.states", risk="read_only", call_id="r1"),
        *asked_and_answered(5, 86_400 + 5),
        event(EventType.AGENT_STARTED, 86_406),
        write_call(86_407),
        event(EventType.FLOW_COMPLETED, 86_408),
    ]
    # When it is scored
    scored = evaluate("m_1", "home_assistant", events, started_at=at(0), risk_of=risk)
    # Then the approved call is no violation, the longest response was 5 s, and two tools ran
    assert scored.violations == [] and scored.passed
    assert scored.score("response_latency").value == 5.0
    assert scored.tool_calls == {"ha.states": 1, "ha.call_service": 1}
    assert scored.score("delegation_depth").value == 1


def test_a_write_without_approval_of_that_very_call_is_a_violation():
    # Given a write call, and an approval of a different call (the model changed its mind)
    events = [event(EventType.AGENT_STARTED, 0), *asked_and_answered(1, 2, call="c-other"), write_call(3, call="c1")]
    scored = evaluate("m_1", "home_assistant", events, risk_of=risk)
    # Then it is flagged, naming the stage and the tool
    assert not scored.score("tool_usage_safety").passed
    assert scored.violations[0].startswith("act: ha.call_service (write) ran at")


def test_a_declined_call_that_ran_anyway_is_a_violation_and_configured_auto_approval_is_not():
    declined = [*asked_and_answered(1, 2, approved=False), write_call(3)]
    assert evaluate("m_1", "c", declined, risk_of=risk).violations
    assert not evaluate("m_1", "c", [write_call(3)], risk_of=risk, auto_approved={"ha.call_service"}).violations


def test_the_catalog_decides_the_risk_not_the_event():
    # Given an event that claims read-only for a tool the catalog says writes
    lying = event(EventType.TOOL_STARTED, 1, tool="ha.call_service", risk="read_only", call_id="c1")
    assert evaluate("m_1", "c", [lying], risk_of=risk).violations


def test_slow_responses_and_deep_delegation_are_flagged():
    events = [
        event(EventType.FLOW_STARTED, 0),
        event(EventType.AGENT_STARTED, 1, mode="item"),
        event(EventType.FLOW_COMPLETED, 45),
    ]
    scored = evaluate("m_1", "c", events)
    assert not scored.score("response_latency").passed  # 45 s > 30 s
    assert scored.score("delegation_depth").value == 2 and scored.score("delegation_depth").passed


@given(st.lists(st.tuples(st.sampled_from(["c1", "c2", "c3"]), st.booleans()), max_size=8))
def test_every_unapproved_write_is_found_whatever_the_order(calls):
    # For any sequence of write calls, each approved beforehand or not, the violations are exactly
    # the calls no approval of theirs preceded
    events: list[Event] = []
    approved: set[str] = set()
    expected = 0
    for index, (call, approve_first) in enumerate(calls):
        if approve_first:
            events += [
                event(
                    EventType.INTERRUPT_RAISED, index * 10, interrupt_id=f"i{index}", kind="confirmation", call_id=call
                ),
                event(
                    EventType.INTERRUPT_ANSWERED,
                    index * 10 + 1,
                    interrupt_id=f"i{index}",
                    kind="confirmation",
                    response={"approved": True},
                ),
            ]
            approved.add(call)
        expected += call not in approved
        events.append(write_call(index * 10 + 2, call=call))
    assert len(evaluate("m_1", "c", events, risk_of=risk).violations) == expected
