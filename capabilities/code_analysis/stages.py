"""Stage hooks of the 7-agent code-analysis pipeline (perception ... integration)."""

from __future__ import annotations

import json
import re
from typing import Any

from capabilities.code_analysis import evidence
from capabilities.code_analysis.models import CriticOutput, IntentOutput, PlanOutput, SynthesisOutput
from missions.core.capability import EvidenceChainViolation, StageContext, StageHooks
from missions.core.envelope import Envelope, InterruptKind

EVIDENCE_CHARS = 12_000
FOLLOW_SYMBOLS = 3
FOLLOW_MATCHES = 3


def question(envelope: Envelope) -> str:
    """The goal plus any clarification the user gave."""
    extra = [a["response"].get("text", "") for a in envelope.answers if a["kind"] == "clarification"]
    return " ".join([envelope.raw_input, *[e for e in extra if e]]).strip()


def current_goal(envelope: Envelope) -> tuple[str, int]:
    """(goal this iteration works on, how many times it was already planned)."""
    goals = envelope.output("intent").get("goals") or [question(envelope)]
    critic = envelope.output("critic")
    plan = envelope.output("planner")
    if critic.get("decision") == "REPLAN" and plan.get("goal"):
        return plan["goal"], int(plan.get("attempt", 1))
    if critic.get("decision") == "NEXT_STAGE" and critic.get("remaining_goals"):
        return critic["remaining_goals"][0], 0
    return goals[0], 0


def digest(results: list[dict[str, Any]], limit: int = EVIDENCE_CHARS) -> str:
    """The evidence as the model sees it: every line prefixed with its file:line."""
    lines: list[str] = []
    for result in results:
        data = result.get("data") or {}
        if result.get("status") != "success":
            lines.append(f"# {result['tool']} {result.get('params')}: {result.get('status')} {result.get('error')}")
            continue
        for symbol in data.get("symbols", []):
            doc = f" — {symbol['docstring']}" if symbol.get("docstring") else ""
            lines.append(f"{symbol['file']}:{symbol['line']}: {symbol['kind']} {symbol['signature']}{doc}")
        for match in data.get("matches", []):
            lines.append(f"{match['file']}:{match['line']}: {match['text'].strip()}")
        for line in data.get("lines", []):
            lines.append(f"{data['file']}:{line['line']}: {line['text']}")
    text = "\n".join(lines)
    return text if len(text) <= limit else text[:limit] + "\n# (evidence truncated)"


class Perception(StageHooks):
    def act(self, ctx: StageContext) -> None:
        assert ctx.tools is not None
        repo = ctx.repository_root()
        ctx.scratch["listing"] = ctx.tools.execute(
            "code.list_files", {"repo": repo, "pattern": "*", "max_results": 2000}
        )

    def post(self, ctx: StageContext) -> dict[str, Any]:
        listing = ctx.scratch["listing"]
        files = (listing.data or {}).get("files", []) if listing.status == "success" else []
        top = sorted({f.split("/", 1)[0] for f in files if "/" in f})
        return {
            "normalized_query": re.sub(r"\s+", " ", ctx.envelope.raw_input).strip(),
            "repository": ctx.envelope.context["repository"]["name"],
            "file_count": len(files),
            "python_files": sum(1 for f in files if f.endswith(".py")),
            "top_dirs": top[:30],
        }


class Intent(StageHooks):
    output_model = IntentOutput

    def prompt(self, ctx: StageContext) -> list[dict[str, str]]:
        overview = ctx.output_of("perception")
        return [
            {
                "role": "system",
                "content": (
                    "You classify questions about a code repository. Split the question into 1-3 goals "
                    "that can each be answered from the code, list identifiers and keywords worth searching, "
                    "and ask for clarification only when the question cannot be searched at all."
                ),
            },
            {
                "role": "user",
                "content": f"Repository top-level folders: {overview.get('top_dirs')}\n"
                f"Question: {question(ctx.envelope)}",
            },
        ]

    def post(self, ctx: StageContext) -> dict[str, Any]:
        output = ctx.llm_output
        assert isinstance(output, IntentOutput)
        if output.clarification_needed and not ctx.resume:
            ctx.ask(
                InterruptKind.CLARIFICATION, output.clarification_question or "Which part of the code should I look at?"
            )
        return output.model_dump(mode="json")


class Planner(StageHooks):
    output_model = PlanOutput

    def prompt(self, ctx: StageContext) -> list[dict[str, str]]:
        goal, attempt = current_goal(ctx.envelope)
        tools = "\n".join(f"- {spec.id}: {spec.description}" for spec in ctx.scratch.get("catalog", []))
        note = " A previous plan for this goal found nothing: search more broadly." if attempt else ""
        return [
            {
                "role": "system",
                "content": (
                    "You plan read-only searches over a repository. Use only these tools (params are JSON; "
                    f"never pass 'repo'):\n{tools or _tool_list()}\nReturn 1-8 steps."
                ),
            },
            {
                "role": "user",
                "content": f"Goal: {goal}.{note}\nSearch terms: {ctx.output_of('intent').get('search_terms')}",
            },
        ]

    def post(self, ctx: StageContext) -> dict[str, Any]:
        output = ctx.llm_output
        assert isinstance(output, PlanOutput)
        goal, attempt = current_goal(ctx.envelope)
        plan = output.model_dump(mode="json")
        plan.update(goal=goal, attempt=attempt + 1)
        return plan


class Traverser(StageHooks):
    def act(self, ctx: StageContext) -> None:
        assert ctx.tools is not None
        repo = ctx.repository_root()
        plan = ctx.output_of("planner")
        results: list[dict[str, Any]] = []

        def run(tool: str, params: dict[str, Any], why: str) -> None:
            params = {k: v for k, v in params.items() if k != "repo"}
            result = ctx.tools.execute(tool, {**params, "repo": repo})  # type: ignore[union-attr]
            results.append(
                {
                    "tool": tool,
                    "params": params,
                    "why": why,
                    "status": result.status,
                    "error": result.error,
                    "data": result.data,
                    "citations": [c.ref for c in result.citations],
                }
            )

        for step in plan.get("steps", []):
            run(step["tool"], dict(step.get("params") or {}), step.get("why", ""))
        for follow in _follow_ups(results):
            run("code.read_lines", follow, "read the code around what the search found")
        ctx.scratch["results"] = results

    def post(self, ctx: StageContext) -> dict[str, Any]:
        results = ctx.scratch["results"]
        return {
            "goal": ctx.output_of("planner").get("goal"),
            "results": results,
            "succeeded": sum(1 for r in results if r["status"] == "success"),
            "failed": sum(1 for r in results if r["status"] != "success"),
        }


def _follow_ups(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    follows: list[dict[str, Any]] = []
    symbols = [s for r in results if r["status"] == "success" for s in (r["data"] or {}).get("symbols", [])]
    for symbol in symbols[:FOLLOW_SYMBOLS]:
        end = min(symbol.get("end_line") or symbol["line"], symbol["line"] + 40)
        follows.append({"file": symbol["file"], "start": symbol["line"], "end": end})
    matches = [m for r in results if r["status"] == "success" for m in (r["data"] or {}).get("matches", [])]
    seen = {f["file"] for f in follows}
    for match in sorted(matches, key=lambda m: m["file"].startswith("tests")):
        if len(follows) >= FOLLOW_SYMBOLS + FOLLOW_MATCHES:
            break
        if match["file"] not in seen:
            seen.add(match["file"])
            follows.append({"file": match["file"], "start": max(1, match["line"] - 3), "end": match["line"] + 6})
    return follows


class Synthesizer(StageHooks):
    output_model = SynthesisOutput

    def prompt(self, ctx: StageContext) -> list[dict[str, str]]:
        traversal = ctx.output_of("traverser")
        return [
            {
                "role": "system",
                "content": (
                    "Answer the goal from the evidence only. Every finding must cite one or more 'file:line' "
                    "references copied from the evidence lines; never cite anything else. Name gaps honestly."
                ),
            },
            {
                "role": "user",
                "content": f"Goal: {traversal.get('goal')}\nEvidence:\n{digest(traversal.get('results', []))}",
            },
        ]

    def post(self, ctx: StageContext) -> dict[str, Any]:
        output = ctx.llm_output
        assert isinstance(output, SynthesisOutput)
        refs = [ref for finding in output.findings for ref in finding.citations]
        evidence.check(refs, ctx.envelope.citations, "the synthesizer")
        goal = ctx.output_of("traverser").get("goal")
        previous = [s for s in ctx.output_of("synthesizer").get("stages", []) if s["goal"] != goal]
        current = {"goal": goal, **output.model_dump(mode="json")}
        return {**output.model_dump(mode="json"), "goal": goal, "stages": [*previous, current]}


class Critic(StageHooks):
    output_model = CriticOutput

    def prompt(self, ctx: StageContext) -> list[dict[str, str]]:
        synthesis = ctx.output_of("synthesizer")
        goals = ctx.output_of("intent").get("goals", [])
        done = [s["goal"] for s in synthesis.get("stages", [])]
        return [
            {
                "role": "system",
                "content": (
                    "You judge, you do not add content. Decide COMPLETE when every goal is answered, NEXT_STAGE "
                    "when this goal is answered and others remain (list them, verbatim), REPLAN when the findings "
                    "do not answer this goal."
                ),
            },
            {
                "role": "user",
                "content": json.dumps(
                    {
                        "goals": goals,
                        "answered_so_far": done,
                        "current": {k: synthesis.get(k) for k in ("goal", "summary", "findings", "gaps")},
                    }
                ),
            },
        ]

    def post(self, ctx: StageContext) -> dict[str, Any]:
        output = ctx.llm_output
        assert isinstance(output, CriticOutput)
        goals = ctx.output_of("intent").get("goals", [])
        invented = [g for g in output.remaining_goals if g not in goals]
        if invented:
            raise EvidenceChainViolation(f"the critic added goals {invented}; it may only judge")
        decision = output.decision
        if decision == "NEXT_STAGE" and not output.remaining_goals:
            decision = "COMPLETE"
        return {**output.model_dump(mode="json"), "decision": decision}


class Integration(StageHooks):
    def post(self, ctx: StageContext) -> dict[str, Any]:
        envelope = ctx.envelope
        stages = ctx.output_of("synthesizer").get("stages", [])
        findings = [f for s in stages for f in s.get("findings", [])]
        refs = list(dict.fromkeys(ref for f in findings for ref in f["citations"]))
        evidence.check(refs, envelope.citations, "the answer")
        failure = ctx.scratch.get("failure")
        reason = (failure or {}).get("reason") or envelope.terminal_reason
        lines = []
        if reason and reason != "completed":
            lines.append(f"(The mission stopped early: {reason}. This answer holds what was found until then.)")
        for index, stage in enumerate(stages, 1):
            lines.append(f"{index}. {stage['goal']}")
            lines.append(f"   {stage['summary']}")
            lines += [f"   - {f['claim']} " + " ".join(f"[{c}]" for c in f["citations"]) for f in stage["findings"]]
            lines += [f"   (gap: {gap})" for gap in stage.get("gaps", [])]
        if not stages:
            lines.append("No findings were produced.")
        return {
            "answer": "\n".join(lines),
            "goals": ctx.output_of("intent").get("goals", []),
            "findings": findings,
            "citations": refs,
            "partial": bool(reason and reason != "completed"),
        }


def _tool_list() -> str:
    from capabilities.code_analysis.repo_tools import CATALOG

    return "\n".join(
        f"- {spec.id}: {spec.description} params={list(spec.parameters.model_fields)}" for spec in CATALOG.list()
    )
