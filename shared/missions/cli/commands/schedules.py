"""`missions schedules`: your own schedules on an API, each a mission of your goal at every firing."""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape

from .._console import one_line, out
from .._target import JsonOption, Target, path, targeted

app = typer.Typer(
    no_args_is_help=True, help="Your own schedules: a mission of your goal at each firing of a cron or rate."
)
ScheduleId = typer.Argument(..., help="The schedule's id.")


def _schedule_line(record: dict[str, Any]) -> str:
    upcoming = record.get("next_fire_times") or []
    when = f"next {upcoming[0]['local']}" if upcoming else "no firing ahead"
    label = f" {record['name']!r}" if record.get("name") else ""
    return (
        f"{record['schedule_id']}{label}  {record['state']}  {record['expression']} {record['timezone']}  "
        f"{record['capability']}  {when}  {record['goal'][:60]}"
    )


def _print_schedule(record: dict[str, Any], as_json: bool) -> None:
    if as_json:
        out.print_json(data=record)
        return
    out.print(escape(_schedule_line(record)), highlight=False, soft_wrap=True)
    for moment in record.get("next_fire_times") or []:
        out.print(f"  fires {moment['local']} ({moment['utc']})", highlight=False)
    for firing in record.get("firings") or []:
        what = firing.get("mission_id") or firing.get("reason") or ""
        out.print(escape(f"  fired {firing['scheduled_time']}: {firing['outcome']} {what}".rstrip()), highlight=False)


def _call(target: Target, method: str, *parts: str) -> dict[str, Any]:
    with one_line():
        found: dict[str, Any] = target.api().call(method, path("schedules", *parts))
    return found


@app.command("create")
@targeted()
def create(
    expression: str = typer.Argument(..., help="cron(min hour day-of-month month day-of-week year), or rate(6 hours)."),
    goal: str = typer.Argument(..., help="The goal of each mission it starts."),
    timezone: str = typer.Option("UTC", "--timezone", "--tz", help="The IANA zone a cron is read in."),
    capability: str = typer.Option("auto", "--capability", help="A capability, or auto (chosen from the goal)."),
    name: str = typer.Option("", "--name", help="A label for you."),
    as_json: JsonOption = False,
    *,
    target: Target,
) -> None:
    """Create a schedule; prints its id and next firings (a bad expression: one line saying what is wrong)."""
    body = {"expression": expression, "goal": goal, "timezone": timezone, "capability": capability, "name": name}
    with one_line():
        record = target.api().call("POST", "/schedules", body, ok=(201,))
    _print_schedule(record, as_json)


@app.command("list")
@targeted()
def list_schedules(as_json: JsonOption = False, *, target: Target) -> None:
    """Your schedules, oldest first, each with its next firing."""
    with one_line():
        found = target.api().call("GET", "/schedules")
    if as_json:
        out.print_json(data=found)
        return
    for record in found["schedules"]:
        out.print(escape(_schedule_line(record)), highlight=False, soft_wrap=True)
    out.print(f"{len(found['schedules'])} of at most {found['limit']}", highlight=False)


@app.command("show")
@targeted()
def show(schedule_id: str = ScheduleId, as_json: JsonOption = False, *, target: Target) -> None:
    """A schedule, its next firings and what its last firings did."""
    _print_schedule(_call(target, "GET", schedule_id), as_json)


@app.command("pause")
@targeted()
def pause(schedule_id: str = ScheduleId, *, target: Target) -> None:
    """Pause a schedule: it fires no more until resumed."""
    _call(target, "POST", schedule_id, "pause")
    out.print(f"paused {schedule_id}", highlight=False)


@app.command("resume")
@targeted()
def resume(schedule_id: str = ScheduleId, *, target: Target) -> None:
    """Resume a paused schedule from its next firing on."""
    record = _call(target, "POST", schedule_id, "resume")
    upcoming = record.get("next_fire_times") or []
    out.print(f"resumed {schedule_id}" + (f", next {upcoming[0]['local']}" if upcoming else ""), highlight=False)


@app.command("delete")
@targeted()
def delete(schedule_id: str = ScheduleId, *, target: Target) -> None:
    """Delete a schedule (its missions already started go on)."""
    with one_line():
        target.api().call("DELETE", path("schedules", schedule_id), ok=(204,))
    out.print(f"deleted {schedule_id}", highlight=False)
