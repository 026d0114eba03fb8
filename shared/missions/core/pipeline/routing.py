"""Routing: from a stage's output to the next stage, honouring edge limits and bounds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from missions.core.mission.bounds import exhausted
from missions.core.mission.envelope import Envelope
from missions.core.pipeline.config import PipelineConfig


@dataclass(frozen=True)
class Decision:
    next_stage: str
    terminal_reason: str | None = None
    # the edge taken when it has a limit, counted in envelope.edge_counts (only a limit reads the count: counting
    # every edge grew the envelope with each distinct stage a mission passed)
    edge: str | None = None
    rule: str | None = None  # which rule matched, for the audit trail


def decide(pipeline: PipelineConfig, envelope: Envelope, stage: str, output: dict[str, Any]) -> Decision:
    """Pick the next stage for `stage` given its output. Pure: the caller applies it."""
    agent = pipeline.agent(stage)
    for rule in agent.routing_rules:
        if rule.matches(output):
            return _follow(pipeline, envelope, stage, rule.target, f"{rule.field}=={rule.value!r}")
    assert agent.default_next is not None  # validation guarantees it for non-final stages
    return _follow(pipeline, envelope, stage, agent.default_next, "default_next")


def on_error(pipeline: PipelineConfig, envelope: Envelope, stage: str) -> Decision | None:
    """Where a failed stage goes when it has error_next, else None (the mission ends)."""
    target = pipeline.agent(stage).error_next
    return _follow(pipeline, envelope, stage, target, "error_next") if target else None


def _follow(pipeline: PipelineConfig, envelope: Envelope, source: str, target: str, rule: str) -> Decision:
    final = pipeline.final
    for _ in range(len(pipeline.agents) + 1):  # on_exceeded chains cannot loop forever
        edge = envelope.edge_key(source, target)
        limit = pipeline.edge_limit(source, target)
        counted = edge if limit is not None else None
        if target == final:
            return Decision(final, edge=counted, rule=rule)
        if limit is not None and envelope.edge_counts.get(edge, 0) >= limit.max_count:
            if limit.on_exceeded is None:
                return Decision(final, terminal_reason=f"edge_limit:{edge}", rule=rule)
            target, rule = limit.on_exceeded, f"edge_limit:{edge}->on_exceeded"
            continue
        reason = _exhausted(pipeline, envelope, target)
        if reason is not None:
            return Decision(final, terminal_reason=reason, rule=rule)
        return Decision(target, edge=counted, rule=rule)
    return Decision(final, terminal_reason="routing_loop", rule=rule)


def _exhausted(pipeline: PipelineConfig, envelope: Envelope, target: str) -> str | None:
    """Bounds for entering `target`; a parallel group is entered whole, then its join stage runs."""
    group = pipeline.group_of(target)
    if not group:
        return exhausted(envelope.bounds, envelope.counters, pipeline.agent(target))
    join = pipeline.agent(group[0]).default_next
    extra = len(group) - 1 + (0 if join == pipeline.final else 1)
    for member in group:
        reason = exhausted(envelope.bounds, envelope.counters, pipeline.agent(member), extra)
        if reason is not None:
            return reason
    return None


def apply(envelope: Envelope, decision: Decision) -> None:
    envelope.next_stage = decision.next_stage
    if decision.edge:
        envelope.edge_counts[decision.edge] = envelope.edge_counts.get(decision.edge, 0) + 1
    if decision.terminal_reason and not envelope.terminal_reason:
        envelope.terminal_reason = decision.terminal_reason
