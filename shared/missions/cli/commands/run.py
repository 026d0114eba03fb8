"""`missions run`: a mission on the embedded emulation (or, with --env or --api-url, on an API), its
progress as it goes, and its answer."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

import typer

from .._answers import AnswerRefused, Unanswered, ask
from .._console import fail, out
from .._inputs import capability as load_capability
from .._inputs import llm_settings, model_label, parse_context, repo_roots
from .._outcomes import refused, timed_out, waiting
from .._remote import run_remote
from .._render import print_summary, render, succeeded
from .._target import Target, targeted

if TYPE_CHECKING:
    from missions.local.emulation import LocalCloud

app = typer.Typer()


@app.command("run")
@targeted(api_url_help="Run it on this API (`missions dev`, a deployment) instead.")
def run(
    capability: str = typer.Argument(..., help="Capability to run, e.g. code_analysis."),
    goal: str = typer.Argument(..., help="What the mission should achieve."),
    repo: str | None = typer.Option(
        None,
        "--repo",
        help="Repository to analyze by path (code_analysis; locally default: the current directory; on an API, "
        "a path under its roots).",
    ),
    repository: str | None = typer.Option(
        None, "--repository", help="On an API (--api-url, --env): a registered repository's id (missions repos)."
    ),
    context: str | None = typer.Option(None, "--context", help="Extra mission context as a JSON object."),
    max_agent_hops: int | None = typer.Option(None, min=2, help="Bound: stages a mission may run."),
    max_llm_calls: int | None = typer.Option(None, min=0, help="Bound: LLM calls."),
    max_iterations: int | None = typer.Option(None, min=1, help="Bound: planning iterations."),
    max_tool_calls: int | None = typer.Option(None, min=0, help="Bound: tool calls."),
    max_cost_usd: float | None = typer.Option(None, min=0.0, help="Bound: model spend in USD."),
    answers: list[str] = typer.Option([], "--answer", help="Answer the next interrupt with this (repeatable)."),
    offline: bool = typer.Option(False, "--offline", help="Use the scripted model even if OPENAI_API_KEY is set."),
    timeout: float = typer.Option(600.0, min=1.0, help="Seconds to wait for the mission."),
    as_json: bool = typer.Option(False, "--json", help="Print the outcome as JSON, no progress."),
    *,
    target: Target,
) -> None:
    """Run a mission, showing its progress, and print the answer: on the embedded emulation, or on a
    deployed API with --env (or any API with --api-url).

    Exit codes: 0 the mission completed (or stopped at one of its bounds); 1 it ended otherwise; 2 bad
    input, nothing started; 3 it waits for an answer this run was not given; 4 an --answer is none of the
    question's options; 5 it was still running when --timeout ran out. With --json every outcome is one
    JSON document on stdout."""
    if target.env is not None or target.api_url is not None:
        local_only = {
            "--offline": offline or None,
            "--max-agent-hops": max_agent_hops,
            "--max-llm-calls": max_llm_calls,
            "--max-iterations": max_iterations,
            "--max-tool-calls": max_tool_calls,
        }
        given = [name for name, value in local_only.items() if value is not None]
        if given:
            fail(f"{', '.join(given)}: only on the emulation; an API runs its capability's bounds (--max-cost-usd)")
        remote_context = parse_context(context)
        remote_context.update({k: v for k, v in (("repo", repo), ("repository", repository)) if v is not None})
        if not goal.strip():
            fail("the goal is empty")
        api = target.api()
        sleep = target.wiring.sleep
        run_remote(api, sleep, capability, goal, remote_context, max_cost_usd, list(answers), timeout, as_json)
    if repository is not None:
        fail("--repository names a repository registered on an API: add --api-url or --env")
    load_capability(capability)
    mission_context = parse_context(context)
    # on one's own machine the repository named is the one root missions may read
    root = os.path.abspath(os.path.expanduser(repo)) if repo is not None else os.getcwd()
    if repo is not None:
        mission_context["repo"] = root
    bounds = {
        k: v
        for k, v in {
            "max_agent_hops": max_agent_hops,
            "max_llm_calls": max_llm_calls,
            "max_iterations": max_iterations,
            "max_tool_calls": max_tool_calls,
            "max_cost_usd": max_cost_usd,
        }.items()
        if v is not None
    }
    from missions.core.errors import MissionRequestError
    from missions.core.mission.requests import MissionRequest
    from missions.local.emulation import LocalCloud
    from missions.service.checkpoints import stage_history

    try:  # the request's own rules before the emulation starts (seconds): bad input fails at once
        MissionRequest.parse(capability=capability, goal=goal, context=mission_context, bounds=bounds)
    except MissionRequestError as exc:
        fail(str(exc))
    llm = {} if offline else llm_settings()
    started = time.perf_counter()
    with LocalCloud([capability], settings={**llm, "repo_roots": repo_roots([root])}) as cloud:
        try:
            mission_id = cloud.start(capability, goal, context=mission_context, bounds=bounds)
        except MissionRequestError as exc:
            fail(str(exc))
        if not as_json:
            out.print(f"[bold]mission[/] {mission_id} · [cyan]{capability}[/] · {model_label(llm)}", highlight=False)
        status = _follow(cloud, mission_id, list(answers), timeout, quiet=as_json)
        outcome = cloud.outcome(mission_id)
        record = cloud.runtime.missions.get(mission_id)
        ran = [r.stage for r in stage_history(cloud.runtime.checkpoints, mission_id)]  # read from its checkpoints
    elapsed = time.perf_counter() - started
    summary = _summary(outcome, record, elapsed, ran)
    if as_json:
        sys.stdout.write(json.dumps(summary, indent=2, default=str) + "\n")
    else:
        print_summary(summary)
    raise typer.Exit(0 if succeeded(status, summary["terminal_reason"], "SUCCEEDED") else 1)


def _follow(cloud: LocalCloud, mission_id: str, answers: list[str], timeout: float, quiet: bool) -> str:
    """Stream events until the execution ends, answering interrupts as they come."""
    from missions.service.interrupts import waiting_questions

    cursor: str | None = None
    deadline = time.monotonic() + timeout
    answered: set[str] = set()
    while True:
        events, cursor = cloud.events(mission_id, after=cursor)
        if not quiet:
            for event in events:
                render(event)
        status = cloud.status(mission_id)
        if status in ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED", "NEVER_STARTED"):
            events, cursor = cloud.events(mission_id, after=cursor)
            if not quiet:
                for event in events:
                    render(event)
            return status
        # only a question its mission waits on: one answered before that would have nowhere to go
        open_questions = waiting_questions(cloud.runtime.interrupts, cloud.runtime.missions.get(mission_id))
        record = open_questions[0] if open_questions else None
        if record is not None and record.interrupt_id not in answered:
            try:
                response = ask(record.kind, record.question, record.options, answers, quiet)
            except Unanswered as asked:  # the emulation, and the mission with it, ends with this run
                shown = [
                    {
                        "interrupt_id": q.interrupt_id,
                        "kind": q.kind.value,
                        "text": q.question,
                        "options": q.options,
                        "stage": q.stage,
                    }
                    for q in open_questions
                ]
                waiting(mission_id, asked, "run it again with --answer '<answer>'", quiet, shown)
            except AnswerRefused as refusal:
                refused(mission_id, refusal, quiet)
            cloud.answer(mission_id, record.interrupt_id, response)
            answered.add(record.interrupt_id)
        if time.monotonic() > deadline:
            timed_out(mission_id, timeout, "run it again with a longer --timeout", quiet)
        time.sleep(0.05)


def _summary(outcome: Any, record: Any, elapsed: float, stages: list[str]) -> dict[str, Any]:
    """What `missions run` reports; `stages`: the stages that ran, in order (the mission's history)."""
    envelope = outcome.envelope
    final = envelope.output(envelope.current_stage) if envelope and envelope.current_stage else {}
    counters = envelope.counters.model_dump() if envelope else record.counters
    return {
        "mission_id": outcome.mission_id,
        "status": outcome.status,
        "mission_status": record.status,
        "terminal_reason": envelope.terminal_reason if envelope else record.terminal_reason,
        "answer": final.get("answer"),
        "citations": final.get("citations", []),
        "counters": counters,
        "stages": stages,
        "errors": [e.model_dump() for e in envelope.errors] if envelope else [],
        "error": outcome.error,
        "cause": outcome.cause,
        "wall_seconds": round(elapsed, 3),
    }
