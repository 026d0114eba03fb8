"""code_analysis: the 7-agent reference pipeline answering questions about a code repository.

perception -> intent -> planner -> traverser -> synthesizer -> critic -> integration, with the
critic routing REPLAN / NEXT_STAGE back to the planner (one goal per stage) and COMPLETE on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from capabilities.code_analysis import stages
from capabilities.code_analysis.policy import offline_policy
from capabilities.code_analysis.repo_tools import CATALOG
from missions.capability import Capability
from missions.envelope import Bounds
from missions.pipeline import AgentConfig, EdgeLimit, PipelineConfig, RoutingRule, ToolAccess
from missions.triggers import MemoryTrigger, Priority, ScheduleTrigger, Triggers, WebhookTrigger

READ_TOOLS = ["code.list_files", "code.grep", "code.read_lines", "code.find_symbol"]

PIPELINE = PipelineConfig(
    name="code_analysis",
    agents=[
        AgentConfig(
            name="perception",
            phase="planning",
            description="normalize the question, survey the repository",
            has_tools=True,
            tool_access=ToolAccess.READ,
            allowed_tools=["code.list_files"],
            default_next="intent",
            memory_mb=256,
        ),
        AgentConfig(
            name="intent",
            phase="planning",
            description="split the question into goals",
            has_llm=True,
            model_role="classifier",
            required_output_fields=["goals"],
            default_next="planner",
        ),
        AgentConfig(
            name="planner",
            phase="planning",
            description="plan tool calls for the current goal",
            has_llm=True,
            model_role="planner",
            counts_iteration=True,
            default_next="traverser",
        ),
        AgentConfig(
            name="traverser",
            description="run the plan's tools and collect cited evidence",
            has_tools=True,
            tool_access=ToolAccess.READ,
            allowed_tools=READ_TOOLS,
            default_next="synthesizer",
            timeout_seconds=120,
        ),
        AgentConfig(
            name="synthesizer",
            description="turn evidence into cited findings",
            has_llm=True,
            model_role="synthesizer",
            default_next="critic",
        ),
        AgentConfig(
            name="critic",
            phase="reflecting",
            description="judge the findings against the goals",
            has_llm=True,
            model_role="critic",
            required_output_fields=["decision"],
            routing_rules=[
                RoutingRule(field="decision", value="REPLAN", target="planner"),
                RoutingRule(field="decision", value="NEXT_STAGE", target="planner"),
                RoutingRule(field="decision", value="COMPLETE", target="integration"),
            ],
            default_next="integration",
        ),
        AgentConfig(name="integration", description="format the cited answer"),
    ],
    bounds=Bounds(max_iterations=4, max_llm_calls=16, max_agent_hops=24, max_tool_calls=120, max_cost_usd=1.0),
    edge_limits=[EdgeLimit(from_stage="critic", to_stage="planner", max_count=3)],
    clarification_resume_stage="intent",
)


def prepare_context(context: dict[str, Any]) -> dict[str, Any]:
    """Resolve the repository root; a mission cannot start on a folder that does not exist."""
    repo = Path(context.get("repo") or ".").expanduser().resolve()
    if not repo.is_dir():
        raise ValueError(f"repository '{repo}' is not a directory")
    return {**context, "repo": str(repo)}


CAPABILITY = Capability(
    name="code_analysis",
    description="Answers questions about a code repository with [file:line] citations.",
    pipeline=PIPELINE,
    hooks={
        "perception": stages.Perception(),
        "intent": stages.Intent(),
        "planner": stages.Planner(),
        "traverser": stages.Traverser(),
        "synthesizer": stages.Synthesizer(),
        "critic": stages.Critic(),
        "integration": stages.Integration(),
    },
    offline_policy=offline_policy,
    catalog=CATALOG,
    keywords=("code", "repository", "function", "class", "where is", "how does"),
    example_goal="How does EnvelopeCodec offload large fields, and where is max_agent_hops enforced?",
    prepare_context=prepare_context,
    complexity=3,  # plans per goal, replans on the critic's word: hierarchical, up to ~12 LLM calls
    triggers=Triggers(
        keywords=["code", "repository", "function", "class", "defined"],
        # a CI system posting {"symbol": ...} after a push asks where that symbol lives now
        webhooks=[
            WebhookTrigger(
                source="git",
                event_types=["push"],
                priority=Priority.HIGH,
                goal_template="Where is {payload.symbol} defined, and where is it used?",
            )
        ],
        # Monday mornings, for users who opted in by storing an item in ("code_digest", ...)
        schedules=[
            ScheduleTrigger(
                id="weekly-digest",
                cron="cron(0 8 ? * MON *)",
                timezone="UTC",
                users="opted_in",
                opt_in_namespace="code_digest",
                priority=Priority.LOW,
                goal_template="Where are the TODO comments in this repository?",
            )
        ],
        # adding a symbol to the user's watchlist explains it
        memory=[
            MemoryTrigger(
                id="watchlist",
                namespace="watchlist",
                condition="field_changed",
                field="symbol",
                goal_template="Where is {new.symbol} defined, and how is it used?",
            )
        ],
    ),
)
