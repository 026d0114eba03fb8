"""Pipeline validation: every rejected pipeline is rejected with a message naming the problem."""

from __future__ import annotations

from typing import Any

import pytest

from missions.core.mission.envelope import InterruptKind
from missions.core.pipeline.config import (
    AgentConfig,
    EdgeLimit,
    ParallelGroup,
    PipelineConfig,
    PipelineError,
    RoutingRule,
    ToolAccess,
    validate_pipeline,
)


def A(name: str, **kwargs: Any) -> AgentConfig:
    return AgentConfig(name=name, **kwargs)


def pipeline(*agents: AgentConfig, **kwargs: Any) -> PipelineConfig:
    return PipelineConfig(name="p", agents=list(agents), **kwargs)


def rejection(*agents: AgentConfig, **kwargs: Any) -> str:
    """The validation message for an invalid pipeline (pydantic wraps PipelineError)."""
    with pytest.raises(ValueError) as caught:
        pipeline(*agents, **kwargs)
    return str(caught.value)


def loop(**b_kwargs: Any) -> list[AgentConfig]:
    """a -> b, b -(retry)-> a, b -> c: a cycle a -> b -> a."""
    return [
        A("a", default_next="b"),
        A("b", routing_rules=[RoutingRule(field="retry", value=True, target="a")], default_next="c", **b_kwargs),
        A("c"),
    ]


# -- accepted ----------------------------------------------------------------------------


def test_a_linear_pipeline_is_accepted_with_first_and_last_as_start_and_final():
    # Given / When a three-stage chain
    p = pipeline(A("a", default_next="b"), A("b", default_next="c"), A("c"))
    # Then
    assert (p.start, p.final) == ("a", "c")
    assert p.edges() == [("a", "b"), ("b", "c")]


def test_validate_pipeline_itself_raises_pipeline_error():
    # Given a pipeline built without validation that routes nowhere sensible
    bad = PipelineConfig.model_construct(
        name="p",
        agents=[A("a", default_next="zz"), A("b")],
        edge_limits=[],
        final_stage=None,
        resume={},
        parallel=[],
    )
    # When / Then the validator raises the library's own error type
    with pytest.raises(PipelineError, match="unknown stage 'zz'"):
        validate_pipeline(bad)


# -- rejected ----------------------------------------------------------------------------


def test_unknown_routing_target_is_named():
    # Given a routing rule to a stage that does not exist
    message = rejection(
        A("a", routing_rules=[RoutingRule(field="x", value=1, target="nowhere")], default_next="b"), A("b")
    )
    # Then the message names the stage and the unknown target
    assert "stage 'a' routes to unknown stage 'nowhere'" in message


def test_unknown_default_next_is_named():
    message = rejection(A("a", default_next="ghost"), A("b"))
    assert "routes to unknown stage 'ghost'" in message


def test_unreachable_stage_is_named():
    # Given b that nothing routes to
    message = rejection(A("a", default_next="c"), A("b", default_next="c"), A("c"))
    # Then
    assert "unreachable stage(s) ['b'] from 'a'" in message


def test_cycle_without_limit_or_iteration_counter_is_named():
    # Given a -> b -> a with nothing bounding the loop
    message = rejection(*loop())
    # Then the message spells the cycle
    assert "cycle a -> b -> a has no edge limit and no stage with counts_iteration" in message


def test_self_loop_is_a_cycle_too():
    message = rejection(
        A("a", routing_rules=[RoutingRule(field="again", value=True, target="a")], default_next="b"), A("b")
    )
    assert "cycle a -> a" in message


def test_cycle_is_accepted_with_an_edge_limit_on_the_back_edge():
    # Given the same loop, bounded by a limit on b -> a
    p = pipeline(*loop(), edge_limits=[EdgeLimit(from_stage="b", to_stage="a", max_count=2)])
    # Then
    assert p.edge_limit("b", "a") is not None


def test_cycle_is_accepted_when_a_stage_on_it_counts_iterations():
    agents = loop()
    agents[0] = A("a", default_next="b", counts_iteration=True)
    assert pipeline(*agents).agent("a").counts_iteration


def test_a_limit_on_any_edge_of_the_cycle_bounds_it_but_one_outside_does_not():
    # Given a limit on a -> b, which lies on the cycle a -> b -> a
    p = pipeline(*loop(), edge_limits=[EdgeLimit(from_stage="a", to_stage="b", max_count=1)])
    # Then the cycle is bounded
    assert p.edge_limits
    # Given instead a limit on b -> c, which is not on the cycle
    message = rejection(*loop(), edge_limits=[EdgeLimit(from_stage="b", to_stage="c", max_count=1)])
    # Then the cycle is still reported
    assert "cycle a -> b -> a" in message


def test_duplicate_stage_names_are_named():
    message = rejection(A("a", default_next="b"), A("b", default_next="a"), A("a"))
    assert "duplicate stage name 'a'" in message


@pytest.mark.parametrize("kind", list(InterruptKind))
def test_resume_stage_that_does_not_exist_is_named(kind: InterruptKind):
    # Given a resume stage for `kind` that is not a stage
    message = rejection(A("a", default_next="b"), A("b"), resume={kind: "zzz"})
    # Then
    assert f"resume.{kind.value}: stage 'zzz' does not exist" in message


def test_an_unknown_interrupt_kind_in_resume_is_rejected():
    with pytest.raises(ValueError, match="resume"):
        pipeline(A("a", default_next="b"), A("b"), resume={"approval": "a"})


def test_existing_resume_stage_is_accepted_and_reported():
    p = pipeline(A("a", default_next="b"), A("b"), resume={"clarification": "a"})
    assert p.resume_stage(InterruptKind.CLARIFICATION) == "a"
    assert p.resume_stage(InterruptKind.CONFIRMATION) is None


def test_final_stage_with_routes_is_rejected():
    # Given the last stage (the final one) routing back
    message = rejection(A("a", default_next="b"), A("b", default_next="a"))
    assert "the final stage 'b' must not route anywhere" in message


def test_explicit_final_stage_with_routes_is_rejected():
    message = rejection(A("a", default_next="b"), A("b"), final_stage="a")
    assert "the final stage 'a' must not route anywhere" in message


def test_final_stage_that_is_not_a_stage_is_named():
    message = rejection(A("a", default_next="b"), A("b"), final_stage="omega")
    assert "final_stage 'omega' is not a stage" in message


def test_non_final_stage_without_default_next_is_named():
    # Given a middle stage that only routes by rule
    message = rejection(A("a", routing_rules=[RoutingRule(field="x", value=1, target="b")]), A("b"))
    assert "stage 'a' has no default_next (only the final stage may end)" in message


def test_edge_limit_on_a_non_edge_is_named():
    # Given a limit on a -> c when a only goes to b
    message = rejection(
        A("a", default_next="b"),
        A("b", default_next="c"),
        A("c"),
        edge_limits=[EdgeLimit(from_stage="a", to_stage="c", max_count=1)],
    )
    assert "edge limit a->c is not an edge of the pipeline" in message


def test_edge_limit_naming_an_unknown_stage_is_named():
    message = rejection(
        A("a", default_next="b"),
        A("b"),
        edge_limits=[EdgeLimit(from_stage="a", to_stage="b", max_count=1, on_exceeded="nope")],
    )
    assert "edge limit names unknown stage 'nope'" in message


def test_tools_with_access_none_are_rejected():
    message = rejection(A("a", has_tools=True, tool_access=ToolAccess.NONE, default_next="b"), A("b"))
    assert "stage 'a' has tools but tool_access is 'none'" in message


def test_allowed_tools_without_has_tools_is_rejected():
    message = rejection(A("a", allowed_tools=["t"], default_next="b"), A("b"))
    assert "stage 'a' lists allowed_tools but has_tools is false" in message


def test_stage_name_pattern_is_enforced():
    with pytest.raises(ValueError, match="pattern"):
        A("Bad-Name")


# -- parallel groups ---------------------------------------------------------------------


def diamond(**c_kwargs: Any) -> list[AgentConfig]:
    """a -> {b, c} (group "both") -> d."""
    return [
        A("a", default_next="both"),
        A("b", default_next="d"),
        A("c", default_next="d", **c_kwargs),
        A("d"),
    ]


BOTH = ParallelGroup(name="both", stages=["b", "c"])


def test_a_parallel_group_is_declared_and_entered_by_its_name():
    # Given the diamond with b and c declared as the group "both"
    p = pipeline(*diamond(), parallel=[BOTH])
    # Then the group runs b and c, and a's edge to it reaches both
    assert p.parallel_groups() == [["b", "c"]]
    assert p.group_of("both") == p.group_of("c") == ["b", "c"]
    assert p.group_of("a") is None
    assert p.edges()[0] == ("a", "both")


def test_routing_to_a_member_of_a_group_is_rejected():
    # Given a stage routing to b, which only runs inside its group
    message = rejection(
        A("a", default_next="b"), A("b", default_next="d"), A("c", default_next="d"), A("d"), parallel=[BOTH]
    )
    assert "stage 'a' routes to 'b', which runs in parallel group 'both': route to the group" in message


def test_stages_with_different_join_targets_cannot_be_a_group():
    message = rejection(
        A("a", default_next="both"), A("b", default_next="c"), A("c", default_next="d"), A("d"), parallel=[BOTH]
    )
    assert "the stages of parallel group 'both' need one default_next after them (the join)" in message


def test_a_group_naming_an_unknown_stage_or_a_stage_name_is_rejected():
    ghost = ParallelGroup(name="both", stages=["b", "ghost"])
    assert "parallel group 'both' names unknown stage 'ghost'" in rejection(*diamond(), parallel=[ghost])
    clash = ParallelGroup(name="d", stages=["b", "c"])
    message = rejection(
        A("a", default_next="d"), A("b", default_next="d"), A("c", default_next="d"), A("d"), parallel=[clash]
    )
    assert "parallel group 'd' has the name of a stage" in message


def test_parallel_stage_with_routing_rules_is_rejected():
    message = rejection(*diamond(routing_rules=[RoutingRule(field="x", value=1, target="d")]), parallel=[BOTH])
    assert "stage 'c' runs in parallel group 'both' and so cannot have routing rules" in message


def test_an_output_limit_per_role_names_a_role_that_asks_a_model():
    # Given a planner stage (a model role) and a stage that asks no model
    stages = (A("plan", has_llm=True, model_role="planner", default_next="end"), A("end"))
    # Then a limit for its role is its stages' default, and one for a role no stage has is refused
    assert pipeline(*stages, max_tokens={"planner": 512}).output_limit(stages[0]) == 512
    assert "max_tokens.writer: no stage asks a model as 'writer'" in rejection(*stages, max_tokens={"writer": 512})
    assert "max_tokens.end" in rejection(*stages, max_tokens={"end": 512})
    assert "max_tokens.planner: 0" in rejection(*stages, max_tokens={"planner": 0})
