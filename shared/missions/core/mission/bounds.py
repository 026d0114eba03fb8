"""Bounds: when a mission must stop going further, and why."""

from __future__ import annotations

from missions.core.mission.envelope import Bounds, Counters
from missions.core.pipeline.config import AgentConfig


def exhausted(bounds: Bounds, counters: Counters, next_agent: AgentConfig, extra_hops: int = 0) -> str | None:
    """The terminal reason if running `next_agent` would pass a bound, else None.

    Hops are checked against max_agent_hops - 1 so the final stage itself still fits within
    max_agent_hops: every mission ends through its final stage. `extra_hops` are hops that
    follow unconditionally (the other members of a parallel group and its join stage).
    """
    if counters.agent_hops + extra_hops >= bounds.max_agent_hops - 1:
        return "max_agent_hops"
    if next_agent.counts_iteration and counters.iterations >= bounds.max_iterations:
        return "max_iterations"
    if next_agent.has_llm and counters.llm_calls >= bounds.max_llm_calls:
        return "max_llm_calls"
    if next_agent.has_tools and counters.tool_calls >= bounds.max_tool_calls:
        return "max_tool_calls"
    if counters.cost_usd > bounds.max_cost_usd:
        return "max_cost_usd"
    return None
