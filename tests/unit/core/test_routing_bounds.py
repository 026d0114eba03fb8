"""Routing decisions, edge limits, and the bounds that end a mission through its final stage."""

from __future__ import annotations

from typing import Any

import pytest

from missions.core.mission.bounds import exhausted
from missions.core.mission.envelope import Bounds, Counters, Envelope
from missions.core.pipeline import routing as routing
from missions.core.pipeline.config import AgentConfig, EdgeLimit, PipelineConfig, RoutingRule


def envelope(**kwargs: Any) -> Envelope:
    return Envelope(capability="t", raw_input="goal", **kwargs)


def review_pipeline(*, limit: EdgeLimit | None = None, **bounds: Any) -> PipelineConfig:
    """work -> review; review routes on verdict.kind: redo -> work, alt -> side, else -> done."""
    return PipelineConfig(
        name="p",
        agents=[
            AgentConfig(name="work", default_next="review"),
            AgentConfig(
                name="review",
                routing_rules=[
                    RoutingRule(field="verdict.kind", value="redo", target="work"),
                    RoutingRule(field="verdict.kind", value="alt", target="side"),
                    RoutingRule(field="flag", value=True, target="side"),
                ],
                default_next="done",
            ),
            AgentConfig(name="side", default_next="done"),
            AgentConfig(name="done"),
        ],
        edge_limits=[limit or EdgeLimit(from_stage="review", to_stage="work", max_count=2)],
        bounds=Bounds(**bounds),
    )


# -- rules -------------------------------------------------------------------------------


def test_dotted_field_reaches_into_nested_output():
    rule = RoutingRule(field="verdict.kind", value="redo", target="x")
    assert rule.matches({"verdict": {"kind": "redo"}})
    assert not rule.matches({"verdict": {"kind": "ok"}})


@pytest.mark.parametrize("output", [{}, {"verdict": "redo"}, {"verdict": {}}, {"verdict.kind": "redo"}])
def test_dotted_field_missing_or_not_a_dict_does_not_match(output: dict[str, Any]):
    assert not RoutingRule(field="verdict.kind", value="redo", target="x").matches(output)


def test_value_comparison_is_by_equality_including_type_sensitive_none():
    assert RoutingRule(field="v", value=None, target="x").matches({"v": None})
    assert not RoutingRule(field="v", value=None, target="x").matches({})


def test_first_matching_rule_wins():
    # Given an output matching both the 'alt' rule and the later 'flag' rule
    p, env = review_pipeline(), envelope()
    # When
    decision = routing.decide(p, env, "review", {"verdict": {"kind": "alt"}, "flag": True})
    # Then the first rule decides
    assert decision.next_stage == "side"
    assert decision.rule == "verdict.kind=='alt'"


def test_default_next_when_no_rule_matches():
    decision = routing.decide(review_pipeline(), envelope(), "review", {"verdict": {"kind": "fine"}})
    assert (decision.next_stage, decision.rule, decision.terminal_reason) == ("done", "default_next", None)


def test_decide_is_pure_and_apply_commits():
    # Given
    p, env = review_pipeline(), envelope()
    # When deciding only
    decision = routing.decide(p, env, "review", {"verdict": {"kind": "redo"}})
    # Then nothing changed yet
    assert env.edge_counts == {} and env.next_stage is None
    # When applying
    routing.apply(env, decision)
    # Then
    assert env.next_stage == "work"
    assert env.edge_counts == {"review->work": 1}


def test_on_error_follows_error_next_or_returns_none():
    p = PipelineConfig(
        name="p",
        agents=[
            AgentConfig(name="a", default_next="c", error_next="b"),
            AgentConfig(name="b", default_next="c"),
            AgentConfig(name="c"),
        ],
    )
    assert routing.on_error(p, envelope(), "a").next_stage == "b"
    assert routing.on_error(p, envelope(), "b") is None


# -- edge limits -------------------------------------------------------------------------


def test_edge_count_increments_each_time_the_edge_is_taken():
    p, env = review_pipeline(), envelope()
    for expected in (1, 2):
        routing.apply(env, routing.decide(p, env, "review", {"verdict": {"kind": "redo"}}))
        assert env.edge_counts["review->work"] == expected


def test_edge_limit_reached_goes_to_the_final_stage_with_a_reason():
    # Given review -> work already taken twice (the limit)
    p, env = review_pipeline(), envelope(edge_counts={"review->work": 2})
    # When the review asks for another round
    decision = routing.decide(p, env, "review", {"verdict": {"kind": "redo"}})
    routing.apply(env, decision)
    # Then
    assert decision.next_stage == "done"
    assert decision.terminal_reason == "edge_limit:review->work"
    assert env.terminal_reason == "edge_limit:review->work"
    assert env.edge_counts == {"review->work": 2}  # the refused edge is not counted


def test_edge_limit_zero_refuses_the_first_transition():
    p = review_pipeline(limit=EdgeLimit(from_stage="review", to_stage="work", max_count=0))
    decision = routing.decide(p, envelope(), "review", {"verdict": {"kind": "redo"}})
    assert decision.terminal_reason == "edge_limit:review->work"


def test_edge_limit_with_on_exceeded_reroutes():
    # Given a limit that sends the mission aside instead of ending it
    p = review_pipeline(limit=EdgeLimit(from_stage="review", to_stage="work", max_count=1, on_exceeded="side"))
    env = envelope(edge_counts={"review->work": 1})
    # When
    decision = routing.decide(p, env, "review", {"verdict": {"kind": "redo"}})
    routing.apply(env, decision)
    # Then
    assert decision.next_stage == "side"
    assert decision.terminal_reason is None
    assert decision.rule == "edge_limit:review->work->on_exceeded"
    # only an edge with a limit is counted (nothing reads another's count): review->side has none
    assert env.edge_counts == {"review->work": 1}


def test_apply_keeps_the_first_terminal_reason():
    env = envelope(terminal_reason="max_llm_calls")
    routing.apply(env, routing.Decision("done", terminal_reason="edge_limit:a->b"))
    assert env.terminal_reason == "max_llm_calls"


# -- bounds ------------------------------------------------------------------------------

PLAIN = AgentConfig(name="plain")


@pytest.mark.parametrize(
    ("agent", "counters", "bounds", "reason"),
    [
        (PLAIN, Counters(agent_hops=4), Bounds(max_agent_hops=5), "max_agent_hops"),
        (
            AgentConfig(name="loop", counts_iteration=True),
            Counters(iterations=3),
            Bounds(max_iterations=3),
            "max_iterations",
        ),
        (AgentConfig(name="llm", has_llm=True), Counters(llm_calls=10), Bounds(max_llm_calls=10), "max_llm_calls"),
        (
            AgentConfig(name="tool", has_tools=True, tool_access="read"),
            Counters(tool_calls=7),
            Bounds(max_tool_calls=7),
            "max_tool_calls",
        ),
        (PLAIN, Counters(cost_usd=0.51), Bounds(max_cost_usd=0.5), "max_cost_usd"),
    ],
)
def test_each_bound_is_reported_when_reached(agent, counters, bounds, reason):
    assert exhausted(bounds, counters, agent) == reason


@pytest.mark.parametrize(
    ("agent", "counters", "bounds"),
    [
        (PLAIN, Counters(agent_hops=3), Bounds(max_agent_hops=5)),
        (PLAIN, Counters(iterations=9, llm_calls=99, tool_calls=999), Bounds()),  # not this stage's business
        (AgentConfig(name="loop", counts_iteration=True), Counters(iterations=2), Bounds(max_iterations=3)),
        (AgentConfig(name="llm", has_llm=True), Counters(llm_calls=9), Bounds(max_llm_calls=10)),
        (PLAIN, Counters(cost_usd=0.5), Bounds(max_cost_usd=0.5)),  # cost ends only when passed
    ],
)
def test_below_every_bound_nothing_is_exhausted(agent, counters, bounds):
    assert exhausted(bounds, counters, agent) is None


def test_hop_bound_leaves_room_for_the_final_stage():
    # Given max_agent_hops=5
    p = review_pipeline(max_agent_hops=5)
    # When 3 hops are spent, a non-final stage is still allowed
    assert (
        routing.decide(
            p, envelope(bounds=p.bounds, counters=Counters(agent_hops=3)), "review", {"verdict": {"kind": "alt"}}
        ).next_stage
        == "side"
    )
    # When 4 hops are spent, the non-final stage is refused: only the final stage (hop 5) fits
    refused = routing.decide(
        p, envelope(bounds=p.bounds, counters=Counters(agent_hops=4)), "review", {"verdict": {"kind": "alt"}}
    )
    assert (refused.next_stage, refused.terminal_reason) == ("done", "max_agent_hops")
    # and the final stage itself is never refused
    direct = routing.decide(p, envelope(bounds=p.bounds, counters=Counters(agent_hops=4)), "review", {})
    assert (direct.next_stage, direct.terminal_reason) == ("done", None)


def test_on_exceeded_target_is_still_checked_against_bounds():
    # Given the edge limit reroutes to 'side' but the hops are spent
    p = review_pipeline(
        limit=EdgeLimit(from_stage="review", to_stage="work", max_count=0, on_exceeded="side"), max_agent_hops=5
    )
    env = envelope(bounds=p.bounds, counters=Counters(agent_hops=4))
    # Then the bound wins
    decision = routing.decide(p, env, "review", {"verdict": {"kind": "redo"}})
    assert (decision.next_stage, decision.terminal_reason) == ("done", "max_agent_hops")
