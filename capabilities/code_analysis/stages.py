"""The 7-agent code-analysis pipeline, as typed stages.

perception -> intent -> planner -> traverser -> synthesizer -> critic -> integration, the critic
sending the planner back (REPLAN the same goal, NEXT_STAGE the next) until every goal is done.
Four stages ask a model; what they are told is their prompt (capability.toml) and the facts they
pass. The code keeps the evidence chain: a finding may cite only lines a tool returned, and the
critic may judge the goals but never add one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from capabilities.code_analysis import evidence, history
from capabilities.code_analysis.models import (
    Answer,
    CriticOutput,
    Finding,
    GoalFindings,
    IntentOutput,
    Plan,
    PlanOutput,
    Survey,
    Synthesis,
    SynthesisOutput,
    TermSearch,
    ToolRun,
    Traversal,
)
from capabilities.code_analysis.questions import classify
from capabilities.code_analysis.repo_tools import CATALOG, count_mentions
from missions.core.capability.registry import Ctx, EvidenceChainViolation, InvalidAnswer, stage
from missions.core.capability.tools import ToolResult
from missions.core.llm.provider import validation_errors
from missions.core.mission.envelope import InterruptKind

FOLLOW_SYMBOLS = 3
FOLLOW_MATCHES = 3


@stage
def perception(ctx: Ctx) -> Survey:
    """Surveys the repository, so the intent stage knows its top-level folders."""
    listing: ToolResult = ctx.tools.execute(
        "code.list_files", {"repo": ctx.repository_root(), "pattern": "*", "max_results": 2000}
    )
    files: list[str] = (listing.data or {}).get("files", []) if listing.status == "success" else []
    return Survey(
        normalized_query=re.sub(r"\s+", " ", ctx.goal).strip(),
        repository=ctx.context["repository"]["name"],
        file_count=len(files),
        python_files=sum(1 for f in files if f.endswith(".py")),
        top_dirs=sorted({f.split("/", 1)[0] for f in files if "/" in f})[:30],
    )


def question(ctx: Ctx) -> str:
    """The goal plus any clarification the user gave."""
    extra = [a["response"].get("text", "") for a in ctx.answers if a["kind"] == "clarification"]
    return " ".join([ctx.goal, *[e for e in extra if e]]).strip()


@stage
def intent(ctx: Ctx, perception: Survey) -> IntentOutput:
    """Splits the question into goals. A question the model cannot search is put to the user once;
    resumed with the answer, the first answer is replayed and the model thinks over the clarified one."""
    # in a conversation, what earlier turns were about: "Who calls it?" after "Where is compute_tax defined?"
    earlier = ctx.context.get("conversation")
    in_focus = list(earlier.get("focus", []))[:10] if isinstance(earlier, dict) else []
    facts = {"top_level_folders": perception.top_dirs, "in_focus_earlier": in_focus}
    said = ctx.think(IntentOutput, question=question(ctx), **facts)
    if said.clarification_needed:
        ctx.ask(InterruptKind.CLARIFICATION, said.clarification_question or "Which part of the code should I look at?")
        said = ctx.think(IntentOutput, question=question(ctx), **facts)
    return said


def next_goal(intent: IntentOutput, planner: Plan | None, critic: CriticOutput | None) -> tuple[str, int]:
    """(the goal this round works on, which plan for it this is): the code chooses, not the model."""
    if critic is not None and critic.decision == "REPLAN" and planner is not None:
        return planner.goal, planner.attempt + 1
    if critic is not None and critic.decision == "NEXT_STAGE" and critic.remaining_goals:
        return critic.remaining_goals[0], 1
    return intent.goals[0], 1


@stage
def planner(ctx: Ctx, intent: IntentOutput, planner: Plan | None, critic: CriticOutput | None) -> Plan:
    """Plans the tool calls for one goal: the first, the same again after a REPLAN, the next after NEXT_STAGE."""
    goal, attempt = next_goal(intent, planner, critic)
    asked = classify(goal)
    said = ctx.think(
        PlanOutput,
        runnable,
        current_goal=goal,
        attempt=attempt,
        question_kind=asked.kind,
        subjects=asked.subjects,
        search_terms=asked.terms or intent.search_terms,
        tools=tools(),
    )
    return Plan(goal=goal, steps=said.steps, reasoning=said.reasoning, attempt=attempt)


def runnable(said: PlanOutput) -> None:
    """Every step calls a tool of the catalog with parameters it accepts (the runtime adds `repo`): a plan
    the traverser could not run is sent back to the model with what is wrong."""
    wrong = []
    for number, step in enumerate(said.steps, 1):
        spec = CATALOG.get(step.tool)
        if spec is None:
            wrong.append(
                f"step {number}: no tool '{step.tool}' (the tools are {', '.join(s.id for s in CATALOG.list())})"
            )
            continue
        try:
            spec.parameters.model_validate({**step.params, "repo": "."})
        except ValidationError as exc:
            wrong.append(f"step {number} ({step.tool}): invalid params: {validation_errors(exc)}")
    if wrong:
        raise InvalidAnswer("; ".join(wrong))


def tools() -> list[str]:
    """The catalog as the planner's model reads it: each tool, what it does, and its parameters."""
    return [f"{spec.id}: {spec.description} params={list(spec.parameters.model_fields)}" for spec in CATALOG.list()]


@stage
def traverser(ctx: Ctx, planner: Plan) -> Traversal:
    """Runs the plan, then reads the code around what it found: the evidence the findings may cite."""
    repo = ctx.repository_root()
    runs: list[ToolRun] = []

    def run(tool: str, params: dict[str, Any], why: str) -> None:
        root = "repo_path" if tool.startswith(GIT) else "repo"  # the git MCP server names its root so
        params = {k: v for k, v in params.items() if k not in ("repo", "repo_path")}  # the runtime's, never the model's
        result: ToolResult = ctx.tools.execute(tool, {**params, root: repo})
        runs.append(
            ToolRun(
                tool=tool,
                params=params,
                why=why,
                status=result.status,
                error=result.error,
                data=result.data,
                citations=[c.ref for c in result.citations],
            )
        )

    for step in planner.steps:
        run(step.tool, dict(step.params), step.why)
    asked = classify(planner.goal)
    if asked.kind in ("search", "setting", "event", "history"):  # the index's kinds answer from call sites
        for follow in _follow_ups(runs):
            run("code.read_lines", follow, "read the code around what the search found")
    if asked.kind == "history":
        _walk_history(repo, runs, run)
    return Traversal(
        goal=planner.goal,
        results=runs,
        succeeded=sum(1 for r in runs if r.status == "success"),
        failed=sum(1 for r in runs if r.status != "success"),
        term_searches=_search_unfound(repo, [*asked.subjects, *asked.terms], runs),
    )


GIT = "git__"  # the git MCP server's tools (capability.toml `mcp_servers`)
MAX_LOCATED = 60  # lines whose history one goal looks up


def _walk_history(repo: str, runs: list[ToolRun], run: Callable[[str, dict[str, Any], str], None]) -> None:
    """The commit that last changed each line the searches located: the log, newest first, then each commit
    shown until every line is attributed (capabilities.code_analysis.history). What a commit changed of the
    located lines is kept with that commit's call, as the evidence of it."""
    pending: dict[tuple[str, int], str] = {}
    for done in runs:
        data = done.data or {}
        if done.status != "success":
            continue
        read = [(data.get("file"), line["line"], line["text"]) for line in data.get("lines", [])]
        for file, number, text in [*read, *((m["file"], m["line"], m["text"]) for m in data.get("matches", []))]:
            if isinstance(file, str) and len(text.strip()) > 3 and len(pending) < MAX_LOCATED:
                pending.setdefault((file, int(number)), text)
    if not pending:
        return
    run(f"{GIT}git_log", {"max_count": history.MAX_COMMITS}, "list the repository's commits, newest first")
    log = runs[-1]
    if log.status != "success":
        return
    for sha in history.commits_in_log(str((log.data or {}).get("text", "")))[: history.MAX_SHOWS]:
        if not pending:
            break
        run(f"{GIT}git_show", {"revision": sha}, f"read commit {sha[:12]}: which of the located lines it changed")
        shown = runs[-1]
        commit = history.parse_show(str((shown.data or {}).get("text", ""))) if shown.status == "success" else None
        changes = history.attribute(commit, pending) if commit is not None else []
        if changes:
            runs[-1] = shown.model_copy(update={"data": {**(shown.data or {}), "changes": changes}})


def _search_unfound(repo: str, terms: list[str], runs: list[ToolRun]) -> list[TermSearch]:
    """Each word no tool result mentions, searched case-insensitively over every text file: a gap may
    say a word is not in the repository only on this evidence."""
    said = " ".join(json.dumps(r.data).lower() for r in runs if r.status == "success")
    searches = []
    for term in terms:
        if term.lower() in said:
            continue
        mentions, files = count_mentions(repo, term)
        how = (
            f"no case-insensitive match in any of the {files} text files" if not mentions else f"{mentions} mention(s)"
        )
        searches.append(TermSearch(term=term, mentions=mentions, searched=how))
    return searches


def _follow_ups(runs: list[ToolRun]) -> list[dict[str, Any]]:
    """The first definitions found, and a few lines around matches in other files (not tests first)."""
    follows: list[dict[str, Any]] = []
    found = [r.data or {} for r in runs if r.status == "success"]
    for symbol in [s for data in found for s in data.get("symbols", [])][:FOLLOW_SYMBOLS]:
        end = min(symbol.get("end_line") or symbol["line"], symbol["line"] + 40)
        follows.append({"file": symbol["file"], "start": symbol["line"], "end": end})
    matches = [m for data in found for m in data.get("matches", [])]
    seen = {f["file"] for f in follows}
    for match in sorted(matches, key=lambda m: m["file"].startswith("tests")):
        if len(follows) >= FOLLOW_SYMBOLS + FOLLOW_MATCHES:
            break
        if match["file"] not in seen:
            seen.add(match["file"])
            follows.append({"file": match["file"], "start": max(1, match["line"] - 3), "end": match["line"] + 6})
    return follows


@stage
def synthesizer(ctx: Ctx, traverser: Traversal, synthesizer: Synthesis | None) -> Synthesis:
    """Turns the evidence into findings, each citing lines a tool returned, and keeps every goal's so far."""
    shown, truncated = evidence.digest(traverser.results)
    asked = classify(traverser.goal)
    not_found = [{"term": t.term, "searched": t.searched} for t in traverser.term_searches if not t.mentions]
    facts: dict[str, Any] = {
        "current_goal": traverser.goal,
        "question_kind": asked.kind,
        "evidence": shown,
        "not_found": not_found,
    }
    if truncated:
        facts["evidence_truncated"] = f"only the first {evidence.EVIDENCE_CHARS} characters of evidence are shown"

    def cited(said: SynthesisOutput) -> None:  # the evidence chain: a repaired answer is held to it as the first
        evidence.check(
            [ref for finding in said.findings for ref in finding.citations], ctx.citations, "the synthesizer"
        )

    said = ctx.think(SynthesisOutput, cited, **facts)
    findings, gaps, dropped = _on_point(ctx, asked.kind, asked.subjects, said, traverser)
    current = GoalFindings(goal=traverser.goal, summary=said.summary, findings=findings, gaps=gaps)
    earlier = [part for part in (synthesizer.stages if synthesizer else []) if part.goal != traverser.goal]
    return Synthesis(
        summary=said.summary,
        findings=findings,
        gaps=gaps,
        goal=traverser.goal,
        stages=[*earlier, current],
        dropped=dropped,
    )


GAP_TERM = re.compile(r"nothing found for '([^']+)'")


def _on_point(
    ctx: Ctx, kind: str, subjects: list[str], said: SynthesisOutput, traverser: Traversal
) -> tuple[list[Finding], list[str], list[str]]:
    """The model's findings and gaps, less what is beside the point: a finding citing a line that is
    neither the subject's definition nor a call of it (for questions about those), and a gap naming a
    word the repository does contain."""
    found = evidence.relevant(kind, subjects, traverser.results)
    findings, dropped = [], []
    for finding in said.findings:
        if kind in ("callers", "definition", "path", "explain") and (found.calls or found.definitions):
            stray = [ref for ref in finding.citations if not found.holds(ref)]
            if stray:
                dropped.append(f"finding citing {stray}: not a definition or call of {' / '.join(subjects)}")
                continue
        findings.append(finding)
    gaps = []
    for gap in said.gaps:
        named = GAP_TERM.search(gap)
        mentions = count_mentions(ctx.repository_root(), named[1])[0] if named else 0
        if mentions:
            dropped.append(f"gap '{gap}': the repository mentions '{named[1] if named else ''}' {mentions} time(s)")
        else:
            gaps.append(gap)
    return findings, gaps, dropped


@stage
def critic(ctx: Ctx, intent: IntentOutput, planner: Plan, traverser: Traversal, synthesizer: Synthesis) -> CriticOutput:
    """Judges this goal's findings against the goals; it may name only goals the intent stage set."""
    asked = classify(synthesizer.goal)
    cited = [ref for finding in synthesizer.findings for ref in finding.citations]
    ok, why = evidence.answers(asked.kind, asked.subjects, cited, traverser.results)

    def judges_only(said: CriticOutput) -> None:
        invented = [goal for goal in said.remaining_goals if goal not in intent.goals]
        if invented:
            raise EvidenceChainViolation(f"the critic added goals {invented}; it may only judge")

    said = ctx.think(
        CriticOutput,
        judges_only,
        goals=intent.goals,
        attempt=planner.attempt,
        question_kind=asked.kind,
        evidence_check={"answers": ok, "why": why},
        answered_so_far=[part.goal for part in synthesizer.stages if part.findings],
        searched_without_findings=[part.goal for part in synthesizer.stages if not part.findings],
        current={
            "goal": synthesizer.goal,
            "summary": synthesizer.summary,
            "findings": synthesizer.findings,
            "gaps": synthesizer.gaps,
        },
    )
    if not ok and said.decision != "REPLAN" and planner.attempt == 1:  # once: the plan is sent back, broader
        remaining = said.remaining_goals or [g for g in intent.goals if g != synthesizer.goal]
        verdict = f"sent back: {why}"
        return CriticOutput(
            decision="REPLAN", verdict=verdict, remaining_goals=[g for g in remaining if g in intent.goals]
        )
    if said.decision == "NEXT_STAGE" and not said.remaining_goals:
        return said.model_copy(update={"decision": "COMPLETE"})  # nothing left to move on to
    return said


@stage
def integration(ctx: Ctx, intent: IntentOutput | None, synthesizer: Synthesis | None) -> Answer:
    """The cited answer, every goal's findings in order; on a bound or a failure, what was found until then."""
    stages = synthesizer.stages if synthesizer else []
    findings = [finding for part in stages for finding in part.findings]
    refs = list(dict.fromkeys(ref for finding in findings for ref in finding.citations))
    evidence.check(refs, ctx.citations, "the answer")
    reason = (ctx.failure.get("reason") if ctx.failure else None) or ctx.terminal_reason
    partial = bool(reason and reason != "completed")
    lines = [f"(The mission stopped early: {reason}. This answer holds what was found until then.)"] if partial else []
    for index, part in enumerate(stages, 1):
        lines += [f"{index}. {part.goal}", f"   {part.summary}"]
        lines += [f"   - {f.claim} " + " ".join(f"[{c}]" for c in f.citations) for f in part.findings]
        lines += [f"   (gap: {gap})" for gap in part.gaps]
    if not stages:
        lines.append("No findings were produced.")
    return Answer(
        answer="\n".join(lines),
        goals=intent.goals if intent else [],
        findings=findings,
        citations=refs,
        partial=partial,
    )
