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


__all__ = [
    "CapabilityGraph",
    "CapabilityList",
    "CapabilityView",
    "GraphEdge",
    "GraphNode",
]
