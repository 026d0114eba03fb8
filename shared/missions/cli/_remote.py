"""`missions run` on an API: start the mission over HTTP, follow its events, ask its questions, print
its result as the local run does."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

import typer

from missions.client import ApiClient
from missions.core.mission.events import Event, EventType

from ._answers import AnswerRefused, Unanswered, ask
from ._console import err, one_line, out
from ._outcomes import refused, timed_out, waiting
from ._render import print_summary, render, succeeded
from ._target import path

TERMINAL = ("completed", "failed", "cancelled", "archived")
POLL_SECONDS = 0.25


def run_remote(
    api: ApiClient,
    sleep: Callable[[float], None],
    capability: str,
    goal: str,
    context: dict[str, Any],
    max_cost_usd: float | None,
    answers: list[str],
    timeout: float,
    as_json: bool,
) -> NoReturn:
    """POST /missions, follow its events, ask its questions, print its result (as `run` does locally)."""
    import uuid

    body: dict[str, Any] = {"capability": capability, "goal": goal, "context": context}
    if max_cost_usd is not None:
        body["max_cost_usd"] = max_cost_usd
    started = time.perf_counter()
    with one_line():  # the key makes a retried start (503 with Retry-After) start one mission, not two
        created = api.call("POST", "/missions", body, ok=(202,), headers={"Idempotency-Key": str(uuid.uuid4())})
    mission_id = created["mission_id"]
    if not as_json:
        queued = " · queued behind your running missions" if created.get("status") == "queued" else ""
        out.print(f"[bold]mission[/] {mission_id} · [cyan]{capability}[/] · {api.base_url}{queued}", highlight=False)
    try:
        with one_line():
            mission, stages, errors = _follow_remote(api, sleep, mission_id, answers, timeout, quiet=as_json)
    except KeyboardInterrupt:
        err.print(f"stopped following; mission {mission_id} goes on: missions status {mission_id}", highlight=False)
        raise typer.Exit(130) from None
    result = mission.get("result") or {}
    summary = {
        "mission_id": mission_id,
        "capability": mission.get("capability", capability),
        "status": mission["status"],
        "terminal_reason": mission.get("terminal_reason") or result.get("terminal_reason"),
        "answer": result.get("answer"),
        "citations": result.get("citations") or [],
        "counters": mission.get("counters") or {},
        "cost_usd": mission.get("cost_usd", 0.0),
        "stages": stages,
        "errors": errors,
        "api_url": api.base_url,
        "wall_seconds": round(time.perf_counter() - started, 3),
    }
    if as_json:
        sys.stdout.write(json.dumps(summary, indent=2, default=str) + "\n")
    else:
        print_summary(summary)
    raise typer.Exit(0 if succeeded(summary["status"], summary["terminal_reason"], "completed") else 1)


def _follow_remote(
    api: ApiClient,
    sleep: Callable[[float], None],
    mission_id: str,
    answers: list[str],
    timeout: float,
    quiet: bool,
) -> tuple[dict[str, Any], list[str], list[dict[str, Any]]]:
    """Read events and the mission until it ends, answering each question once: (the mission as it
    ended, the stages that ran, the errors they reported)."""
    cursor: str | None = None
    stages: list[str] = []
    errors: list[dict[str, Any]] = []
    answered: set[str] = set()
    deadline = time.monotonic() + timeout

    def read_events() -> None:
        nonlocal cursor
        while True:
            page = api.call("GET", path("missions", mission_id, "events"), query={"after": cursor, "limit": 500})
            for raw in page["events"]:
                try:
                    event = Event.model_validate(raw)
                except ValueError:  # a kind this CLI does not know yet
                    continue
                if event.type is EventType.AGENT_STARTED and event.stage:
                    stages.append(event.stage)
                if event.type is EventType.FLOW_ERROR:
                    p = event.payload
                    errors.append(
                        {"stage": event.stage or "", "kind": str(p.get("error")), "message": str(p.get("message"))}
                    )
                if not quiet:
                    render(event)
            cursor = page.get("cursor") or cursor
            if len(page["events"]) < 500:
                return

    while True:
        read_events()
        mission: dict[str, Any] = api.call("GET", path("missions", mission_id))
        if mission["status"] in TERMINAL:
            read_events()  # what the last stage wrote as it ended
            return mission, stages, errors
        pending = mission.get("pending_interrupt")
        if pending and pending["interrupt_id"] not in answered:
            try:
                response = ask(pending["kind"], pending["question"], pending.get("options") or [], answers, quiet)
            except Unanswered as asked:  # it goes on waiting, on the API, for whoever answers
                shown = [
                    {
                        "interrupt_id": q["interrupt_id"],
                        "kind": q["kind"],
                        "text": q["question"],
                        "options": q.get("options") or [],
                        "stage": q.get("stage"),
                    }
                    for q in mission.get("pending_interrupts") or [pending]
                ]
                answer_with = f"missions answer {mission_id} {pending['interrupt_id']} '<answer>'"
                waiting(mission_id, asked, answer_with, quiet, shown)
            except AnswerRefused as refusal:
                refused(mission_id, refusal, quiet)
            api.call(
                "POST",
                path("missions", mission_id, "interrupts", pending["interrupt_id"]),
                response.model_dump(exclude_none=True),
            )
            answered.add(pending["interrupt_id"])
            continue
        if time.monotonic() > deadline:
            timed_out(mission_id, timeout, f"it goes on: missions status {mission_id}", quiet)
        sleep(POLL_SECONDS)
