"""The installed capabilities and each one's compiled graph."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class CapabilityView(BaseModel):
    name: str
    description: str
    stages: list[str]
    llm_stages: list[str]
    tools: list[str]
    bounds: dict[str, Any]
    example: str | None
    complexity: int
    multitask_strategy: Literal["reject", "enqueue", "interrupt", "rollback"] = Field(
        description="what a request of an active conversation or concurrency key does, unless it says otherwise"
    )
    triggers: list[str] = Field(description="its triggers, as GET /triggers/{trigger}/decisions names them")


class CapabilityList(BaseModel):
    capabilities: list[CapabilityView]


class GraphNode(BaseModel):
    id: str = Field(description="the state's name (inside a branch: <parent>/<state>)")
    kind: Literal["stage", "await", "guard", "choice", "pass", "parallel", "map", "end", "fail"]
    stage: str | None = Field(description="the stage a Task state runs (a mission's `stage` names it)")
    label: str


class GraphEdge(BaseModel):
    from_: str = Field(alias="from")
    to: str
    label: str


class CapabilityGraph(BaseModel):
    """The capability's compiled state machine, as Step Functions runs it, to draw."""

    capability: str
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    start: str


class CostLine(BaseModel):
    quantity: float = Field(description="the billing line's quantity for one mission (its unit: the line's)")
    dollars: float


class CostRange(BaseModel):
    stages: int = Field(description="stage runs (Lambda invocations of stages) on this path")
    path: list[str] = Field(description="the routing path: stage or parallel group names")
    standard_transitions: int
    segments: int
    dollars_per_mission: float


class CapabilityCost(BaseModel):
    """One mission's predicted AWS infrastructure cost at list prices (no LLM tokens), from the compiled
    machine and the per-stage figures `make bench` measures; `range`: the min, typical and max paths."""

    capability: str
    layout: str
    prices_as_of: str
    lambda_architecture: str
    lines: dict[str, CostLine]
    dollars_per_mission: float
    dollars_per_1000_missions: float
    range: dict[Literal["min", "typical", "max"], CostRange]
    assumptions: list[str]


__all__ = [
    "CapabilityCost",
    "CapabilityGraph",
    "CapabilityList",
    "CapabilityView",
    "CostLine",
    "CostRange",
    "GraphEdge",
    "GraphNode",
]
