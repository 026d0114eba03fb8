"""What the model answers and what each stage returns (routing reads `route`, `decision`, `ready`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Route = Literal[
    "answer",
    "team",
    "review",
    "propose",
    "control",
    "rollback",
    "dashboard",
    "dashboard_rollback",
    "unavailable",
    "catalog",
]
Specialist = Literal["energy", "behavioral", "diagnostic"]
SPECIALISTS: tuple[Specialist, ...] = ("energy", "behavioral", "diagnostic")


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AutomationDraft(_Out):
    """An automation as HA's editor stores it (validated in full by capabilities.home_assistant.automation)."""

    alias: str = Field(min_length=1, max_length=200)
    description: str = ""
    triggers: list[dict[str, Any]] = Field(min_length=1)
    conditions: list[dict[str, Any]] = Field(default_factory=list)
    actions: list[dict[str, Any]] = Field(min_length=1)
    mode: Literal["single", "restart", "queued", "parallel"] = "single"


class DashboardDraft(_Out):
    """A Lovelace dashboard to propose: what it shows. The dashboard stage lays out its cards from the
    entities that exist (those named, and those of the domains and device classes named, in the areas
    named), unless the model wrote the views itself; either way it is checked against the home."""

    title: str = Field(min_length=1, max_length=80)
    icon: str = Field("mdi:view-dashboard", description="prefix:name, e.g. mdi:lightning-bolt")
    url_path: str | None = Field(None, description="where it lives, with a hyphen (default: dashboard-<title>)")
    entities: list[str] = Field(default_factory=list, description="entity ids to show")
    domains: list[str] = Field(default_factory=list, description="show the entities of these domains (light...)")
    device_classes: list[str] = Field(default_factory=list, description="...and of these (energy, power...)")
    areas: list[str] = Field(default_factory=list, description="only those in these areas (area ids)")
    views: list[dict[str, Any]] = Field(default_factory=list, description="Lovelace views, if written by hand")


class ArchitectPlan(_Out):
    """The architect's decision: answer, consult the team, review, propose an automation, act, or undo."""

    route: Route
    specialists: list[Specialist] = Field(default_factory=list, description="for route team")
    entities: list[str] = Field(default_factory=list, description="entity ids the question is about")
    answer: str = Field("", description="for route answer: the answer, from the evidence")
    service: str | None = Field(None, description="for route control: domain.service, e.g. light.turn_on")
    automation: AutomationDraft | None = Field(None, description="for route propose")
    automation_id: str | None = Field(None, description="for review of one automation, or rollback")
    dashboard: DashboardDraft | None = Field(None, description="for route dashboard")
    url_path: str | None = Field(None, description="for route dashboard_rollback: the dashboard to undo")
    reasoning: str = ""


class Architecture(ArchitectPlan):
    """The plan, with what the architect found (HA's clock, and why it cannot go on if it cannot)."""

    now: str  # HA's own clock (ISO): analyses look back from it
    request: str = ""  # the request as read: a follow-up with the turn it follows
    period_hours: int = 168  # the analysis window: this long...
    period_end: str | None = None  # ...ending here (None: HA's now)
    carried: list[str] = Field(default_factory=list)  # entities a follow-up carries from the conversation
    problem: str | None = None  # route unavailable: HA down, token rejected, an entity that does not exist
    problem_kind: str | None = None


class AnalysisScript(_Out):
    """A specialist's analysis: a standard-library Python script reading INPUT and setting RESULT."""

    code: str = Field(min_length=1)
    explanation: str = ""


class Insight(_Out):
    specialist: Specialist
    title: str
    summary: str
    figures: dict[str, float] = Field(default_factory=dict, description="name_unit -> value, e.g. kwh_week")
    entities: list[str] = Field(default_factory=list)
    period_start: str | None = None
    period_end: str | None = None
    evidence: list[str] = Field(default_factory=list, description="file:line references the tools returned")


class Findings(_Out):
    specialist: Specialist
    ran: bool
    insights: list[Insight] = Field(default_factory=list)
    error: str | None = None
    sandbox_ms: float = 0.0
    chart: str | None = None  # the artifact holding its chart, if it drew one


class Discussion(_Out):
    """The model's word on conflicting findings (asked only when the team disagrees)."""

    resolution: str
    recommendations: list[str] = Field(default_factory=list)


class Synthesis(_Out):
    decision: Literal["report", "discuss", "propose"]
    insights: list[Insight]
    conflicts: list[str] = Field(default_factory=list)
    recommendations: list[str] = Field(default_factory=list)
    fixes: list[dict[str, Any]] = Field(default_factory=list)  # automation configs to propose (review)
    failures: list[str] = Field(default_factory=list)  # analyses that could not run, and why
    round: int = 1


class Reviewed(_Out):
    targets: list[str]  # automation ids
    configs: dict[str, dict[str, Any]]


class Proposal(_Out):
    automation_id: str
    alias: str
    config: dict[str, Any]
    original: dict[str, Any] | None
    valid: bool
    reasons: list[str] = Field(default_factory=list)
    diff: str = ""
    written_for: str | None = None  # the HA version whose syntax the config is in
    checked_by_home_assistant: bool = False  # HA's own validate_config took it (else the shape check alone)


class Proposals(_Out):
    ready: bool  # at least one valid proposal to offer for approval
    proposals: list[Proposal]


class Deployed(_Out):
    results: dict[str, str]  # automation id -> deployed | declined | failed: <why>


class Controlled(_Out):
    service: str
    entities: list[str]
    status: str
    states: dict[str, str] = Field(default_factory=dict)


class RolledBack(_Out):
    automation_id: str | None
    status: str


class DashboardProposal(_Out):
    """A dashboard as it would be saved, checked against this home, shown as YAML and in words."""

    ready: bool  # valid: offered for approval
    url_path: str
    title: str
    icon: str
    config: dict[str, Any]
    original: dict[str, Any] | None = None  # the configuration HA holds there now (None: none)
    exists: bool = False  # the dashboard is there already: its configuration is replaced, not created
    reasons: list[str] = Field(default_factory=list)  # why it is not valid
    yaml: str = ""
    description: str = ""  # the preview in words: its views and cards
    diff: str = ""


class DashboardDeployed(_Out):
    url_path: str
    status: str  # deployed | declined | refused: <HA's words> | failed: <why>


class DashboardRolledBack(_Out):
    url_path: str | None
    status: str


class Report(_Out):
    answer: str
    route: Route
    focus: list[str] = Field(default_factory=list)  # what the conversation keeps in focus: the entities used
    insights: list[Insight] = Field(default_factory=list)
    citations: list[str] = Field(default_factory=list)
    deployed: dict[str, str] = Field(default_factory=dict)
