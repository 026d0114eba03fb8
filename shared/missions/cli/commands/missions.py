"""`missions status`, `list`, `usage`, `evaluate`, `history`, and the controls (`cancel`, `pause`,
`resume`, `note`, `answer`, `fork`): your missions on an API."""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape

from missions.core.mission.envelope import InterruptResponse
from missions.core.mission.forks import edit_from_assignments

from .._answers import AnswerRefused, Unanswered, ask
from .._console import fail, one_line, out
from .._target import JsonOption, Target, path, targeted

app = typer.Typer()
MissionId = typer.Argument(..., help="The mission's id.")


@app.command("usage")
@targeted()
def usage(mission_id: str = MissionId, as_json: JsonOption = False, *, target: Target) -> None:
    """Every model call of a mission: stage, agent version, provider, model, tokens, cost, latency, outcome."""
    with one_line():
        found = target.api().call("GET", path("missions", mission_id, "usage"))
    if as_json:
        out.print_json(data=found)
        return
    for call in found["calls"]:
        line = (
            f"{call['stage']:<12} v{call['version'] or 1}  {call['provider']}/{call['model']}  "
            f"{call['tokens_in']}+{call['tokens_out']} tokens  ${call['cost_usd']:.6f}  {call['latency_ms']:.0f} ms  "
            f"{call['outcome']}"
        )
        if call["outcome"] == "abandoned":  # the client gave up: the worst case is counted
            line += f" (estimated: limit {call.get('max_tokens')}, after {call.get('timeout_s')} s)"
        out.print(escape(line), highlight=False)
    total = found["total"]
    summary = f"{total['calls']:.0f} calls, ${total['cost_usd']:.6f}"
    if total.get("abandoned"):
        summary += f" ({total['abandoned']:.0f} abandoned, ${total['abandoned_cost_usd']:.6f} estimated)"
    out.print(summary, highlight=False)


@app.command("status")
@targeted()
def status(mission_id: str = MissionId, as_json: JsonOption = False, *, target: Target) -> None:
    """A mission's status, stage, question waiting for you, place in the queue, result and cost."""
    with one_line():
        mission = target.api().call("GET", path("missions", mission_id))
    if as_json:
        out.print_json(data=mission)
        return
    lifecycle = f" ({mission['lifecycle']})" if mission.get("lifecycle") not in (None, mission["status"]) else ""
    lines = [
        f"{mission['mission_id']} · {mission['capability']} · {mission['status']}{lifecycle}, "
        f"stage {mission.get('stage') or '-'}",
        f"goal: {mission['goal']}",
    ]
    questions = mission.get("pending_interrupts") or (
        [mission["pending_interrupt"]] if mission.get("pending_interrupt") else []
    )
    for number, pending in enumerate(questions, 1):
        options = f" [{'/'.join(pending['options'])}]" if pending.get("options") else ""
        which = f" ({number} of {len(questions)}, {pending['stage']})" if len(questions) > 1 else ""
        lines.append(f"asks{which}: {pending['question']}{options}")
        lines.append(f"answer with: missions answer {mission['mission_id']} {pending['interrupt_id']} '...'")
    if mission.get("parent"):
        lines.append(f"sub-mission of: {mission['parent']['mission_id']}")
    if mission.get("children"):
        lines.append(f"sub-missions: {', '.join(mission['children'])}")
    if mission.get("queue"):
        lines.append(f"queue: position {mission['queue'].get('position')}: {mission['queue'].get('reason')}")
    result = mission.get("result") or {}
    if result.get("answer"):
        lines.append(f"answer: {result['answer']}")
    if mission.get("terminal_reason"):
        lines.append(f"terminal reason: {mission['terminal_reason']}")
    counters = mission.get("counters") or {}
    lines.append(f"cost: ${mission.get('cost_usd', 0):.6f} · {counters.get('llm_calls', 0)} LLM calls")
    for line in lines:
        out.print(escape(line), highlight=False, soft_wrap=True)


@app.command("list")
@targeted()
def list_missions(
    status: str | None = typer.Option(None, "--status", help="Only missions in this status (e.g. interrupted)."),
    capability: str | None = typer.Option(None, "--capability", help="Only missions of this capability."),
    limit: int = typer.Option(20, "--limit", min=1, max=100, help="At most this many, newest first."),
    cursor: str | None = typer.Option(None, "--cursor", help="Where the previous page ended."),
    as_json: JsonOption = False,
    *,
    target: Target,
) -> None:
    """Your missions, newest first."""
    query = {"status": status, "capability": capability, "limit": limit, "cursor": cursor}
    with one_line():
        page = target.api().call("GET", "/missions", query=query)
    if as_json:
        out.print_json(data=page)
        return
    if not page["missions"]:
        out.print("no missions")
    rows = [
        [m["mission_id"], m["capability"], m["status"], m.get("stage") or "-", m["created_at"][:16].replace("T", " ")]
        + [m["goal"] if len(m["goal"]) <= 60 else m["goal"][:59] + "…"]
        for m in page["missions"]
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(5)] if rows else []
    for row in rows:  # one line per mission, whole ids, whatever the terminal's width: for reading and for grep
        line = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[5]
        out.print(escape(line), highlight=False, soft_wrap=True)
    if page.get("cursor"):
        out.print(f"[dim]more: missions list --cursor {page['cursor']}[/]", highlight=False)


@app.command("evaluate")
@targeted()
def evaluate(
    last: int = typer.Option(20, "--last", min=1, max=100, help="Score your newest N missions that ended."),
    as_json: JsonOption = False,
    *,
    target: Target,
) -> None:
    """Score your newest missions: response latency, tool-use safety, delegation depth, tool calls."""
    ended = ("completed", "failed", "cancelled")
    with one_line():
        api = target.api()
        missions = [m for m in api.call("GET", "/missions", query={"limit": 100})["missions"] if m["status"] in ended]
        scored = [api.call("GET", f"/missions/{m['mission_id']}/evaluation") for m in missions[:last]]
    if as_json:
        out.print_json(data={"evaluations": scored})
        return
    if not scored:
        out.print("no missions have ended yet")
        return
    for evaluation in scored:
        scores = {s["name"]: s for s in evaluation["scores"]}
        flags = [name for name, score in scores.items() if not score["passed"]]
        line = (
            f"{evaluation['mission_id']}  {evaluation['capability']:<14} "
            f"latency {scores['response_latency']['value']:>6.1f} s  depth {scores['delegation_depth']['value']:.0f}  "
            f"tools {scores['tool_call_count']['value']:.0f}  "
            + ("ok" if not flags else "FLAGGED: " + ", ".join(flags))
        )
        out.print(escape(line), highlight=False, soft_wrap=True)
        for violation in evaluation["violations"]:
            out.print(escape(f"    safety: {violation}"), highlight=False, soft_wrap=True)
    violations = sum(len(e["violations"]) for e in scored)
    passed = sum(1 for e in scored if all(s["passed"] for s in e["scores"]))
    out.print(f"{passed}/{len(scored)} passed, {violations} safety violation(s)", highlight=False)
    if violations:
        raise typer.Exit(1)


@app.command("history")
@targeted()
def history(
    mission_id: str = MissionId,
    checkpoint: str | None = typer.Argument(None, help="A checkpoint's id: the mission's whole state there."),
    as_json: JsonOption = False,
    *,
    target: Target,
) -> None:
    """A mission's checkpoints, each with the stage runs it records (any can be forked); with a checkpoint,
    the state there (JSON): what a fork from it starts with."""
    with one_line():
        if checkpoint is not None:
            found = target.api().call("GET", path("missions", mission_id, "checkpoints", checkpoint))
        else:
            found = target.api().call("GET", path("missions", mission_id, "checkpoints"))
    if as_json or checkpoint is not None:
        out.print_json(data=found)
        return
    for listed in found["checkpoints"]:
        runs = ", ".join(f"{run['stage']} ({run['status']})" for run in listed["stages"]) or listed["stage"]
        out.print(escape(f"{listed['checkpoint_id']}  {listed['created_at']}  {runs}"), highlight=False)


@app.command("fork")
@targeted()
def fork(
    mission_id: str = MissionId,
    at: str = typer.Option(..., "--at", help="The checkpoint to carry on from (missions history lists them)."),
    assignments: list[str] = typer.Option(
        [],
        "--set",
        help="Change the state first: goal=TEXT, context.KEY=VALUE or outputs.STAGE.KEY=VALUE (VALUE is JSON "
        "when it parses as JSON, null removes the key; an output must still fit its stage's model). Repeatable.",
    ),
    resume_from: str | None = typer.Option(
        None, "--from", help="The stage to run first (default: the one after the checkpoint)."
    ),
    *,
    target: Target,
) -> None:
    """Carry a mission on from one of its checkpoints, as a new mission (started, or queued for a slot),
    with its state edited first if you say how."""
    try:
        edit = edit_from_assignments(assignments)
    except ValueError as exc:
        fail(str(exc))
    if resume_from is not None:
        edit["resume_from"] = resume_from
    with one_line():
        body = target.api().call("POST", path("missions", mission_id, "fork"), {"checkpoint_id": at, **edit}, ok=(202,))
    how = "queued for one of your running slots" if body.get("status") == "queued" else "started"
    out.print(f"forked {mission_id} at {at}: {body['mission_id']} ({how})")


@app.command("cancel")
@targeted()
def cancel(mission_id: str = MissionId, *, target: Target) -> None:
    """Cancel a mission that is queued, running, waiting for you or paused."""
    with one_line():
        target.api().call("POST", path("missions", mission_id, "cancel"))
    out.print(f"cancelled {mission_id}")


@app.command("pause")
@targeted()
def pause(mission_id: str = MissionId, *, target: Target) -> None:
    """Pause a running mission: its stage in flight ends, then it waits (holding none of your running slots)."""
    with one_line():
        target.api().call("POST", path("missions", mission_id, "pause"), ok=(202,))
    out.print(f"pausing {mission_id} (paused once its stage in flight ends)")


@app.command("resume")
@targeted()
def resume(mission_id: str = MissionId, *, target: Target) -> None:
    """Resume a paused mission from where it stopped, with the notes you sent meanwhile."""
    with one_line():
        body = target.api().call("POST", path("missions", mission_id, "resume"))
    how = "queued for one of your running slots" if body.get("status") == "queued" else "running"
    out.print(f"resumed {mission_id} ({how})")


@app.command("note")
@targeted()
def note(
    mission_id: str = MissionId,
    text: str = typer.Argument(..., help="What the mission should know, e.g. 'the budget is 500'."),
    *,
    target: Target,
) -> None:
    """Steer a mission that has not ended: its next stage receives the note."""
    with one_line():
        body = target.api().call("POST", path("missions", mission_id, "notes"), {"text": text}, ok=(202,))
    out.print(f"noted {body.get('note_id')} for {mission_id}")


@app.command("answer")
@targeted()
def answer(
    mission_id: str = MissionId,
    interrupt_id: str = typer.Argument(..., help="The question's id (missions status shows it)."),
    text: str | None = typer.Argument(
        None, help="The answer: y/n for a confirmation or review, an option or its number for a choice, else text."
    ),
    *,
    target: Target,
) -> None:
    """Answer the question a mission is waiting on (asked in the terminal when no answer is given)."""
    api = target.api()
    with one_line():
        mission = api.call("GET", path("missions", mission_id))
        waiting: list[dict[str, Any]] = mission.get("pending_interrupts") or [mission.get("pending_interrupt") or {}]
        pending: dict[str, Any] = next((q for q in waiting if q.get("interrupt_id") == interrupt_id), {})
        given = [text] if text is not None else []
        if pending:
            try:
                response = ask(pending["kind"], pending["question"], pending.get("options") or [], given, quiet=False)
            except Unanswered:
                fail(f"mission {mission_id} asks: {pending['question']!r}; no answer was given")
            except AnswerRefused as refusal:  # nothing is sent: the question stays open
                fail(str(refusal))
        elif text is None:
            fail(f"mission {mission_id} is not waiting on {interrupt_id} (it is {mission['status']})")
        else:  # the API says why not (404: no such question; 409: answered already)
            response = InterruptResponse(text=text)
        body = response.model_dump(exclude_none=True)
        done = api.call("POST", path("missions", mission_id, "interrupts", interrupt_id), body)
    after = {
        "queued": " (queued: it resumes when one of your running slots frees)",
        "waiting": " (it resumes once its other questions are answered: missions status " + mission_id + ")",
    }.get(done.get("status"), "")
    out.print(f"answered {interrupt_id}{after}", soft_wrap=True, highlight=False)
