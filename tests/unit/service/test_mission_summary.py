"""What listings show of a mission (missions.ports.missions.MissionSummary): a running one where it is, a
stopped one where it stopped."""

from __future__ import annotations

from missions.ports.missions import MissionRecord, MissionSummary, lifecycle_of, running_stage


def _record(status: str, **fields: object) -> MissionRecord:
    return MissionRecord(mission_id="m1", user_id="u1", capability="c", goal="g", status=status, **fields)  # type: ignore[arg-type]


def test_a_running_missions_summary_says_where_it_is() -> None:
    # Given a running mission two stages in / When it is summarized
    record = _record(
        "running",
        stage="plan",
        next_stage="analyze",
        phase="planning",
        counters={"agent_hops": 2, "cost_usd": 0.5},
    )
    summary = MissionSummary.of(record)
    # Then listings show what its record shows
    assert (summary.stage, summary.next_stage, summary.phase, summary.agent_hops, summary.cost_usd) == (
        "plan",
        "analyze",
        "planning",
        2,
        0.5,
    )
    assert running_stage(summary, "perception") == running_stage(record, "perception") == "analyze"
    assert lifecycle_of(summary) == lifecycle_of(record) == "planning"


def test_a_stopped_missions_summary_keeps_its_last_stage_and_cost_only() -> None:
    # Given a mission that stopped for an answer / When it is summarized
    summary = MissionSummary.of(
        _record(
            "interrupted", stage="plan", next_stage="await:clarification", counters={"agent_hops": 2, "cost_usd": 1}
        )
    )
    # Then where it would go next matters to no listing: it is left out
    assert (summary.stage, summary.cost_usd) == ("plan", 1.0)
    assert (summary.next_stage, summary.phase, summary.agent_hops) == (None, None, 0)
    assert running_stage(summary) is None and lifecycle_of(summary) == "interrupted"


def test_counters_that_say_nothing_usable_cost_nothing() -> None:
    assert _record("running", counters={"cost_usd": "lots", "agent_hops": None}).cost_usd == 0.0
    assert _record("running", counters={"agent_hops": "x"}).agent_hops == 0
