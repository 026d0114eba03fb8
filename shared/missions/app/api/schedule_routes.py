"""Your own schedules: create, list, read, pause, resume and delete them (missions.service.triggers.schedules)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response

from missions.app.api.edge import app, current_user, responses, runtime
from missions.app.api.models.schedules import ScheduleCreate, ScheduleList, ScheduleView
from missions.core.triggers.schedules import ScheduleRecord

_SCHEDULE = "/schedules/<schedule_id>"


def _owned(user: str, schedule_id: str) -> ScheduleRecord:
    """The caller's schedule; another user's is as missing as none (NotFound: 404)."""
    return runtime().schedules.get(user, schedule_id)


@app.post(
    "/schedules",
    summary="Create a schedule",
    responses=responses((201, ScheduleView, "created: it fires from now on"), 409, 503, body=True),
)
def create_schedule(body: ScheduleCreate) -> Response[dict[str, Any]]:
    """A mission of your goal at each firing of a cron or rate expression. 422 says what is wrong (the field
    in `detail`) and, when the expression parses, when it would have fired next (`next_fire_times`); 409 when
    you have as many schedules as you may."""
    service = runtime().schedules
    record = service.create(
        current_user(),
        expression=body.expression,
        timezone=body.timezone,
        goal=body.goal,
        capability=body.capability,
        name=body.name,
        context=dict(body.context),
    )
    return Response(201, "application/json", body=service.view(record))


@app.get("/schedules", summary="Your schedules", responses=responses((200, ScheduleList, "oldest first"), 503))
def list_schedules() -> dict[str, Any]:
    service = runtime().schedules
    return {
        "schedules": [service.view(r) for r in service.list(current_user())],
        "limit": service.limit,
        "minimum_interval_minutes": int(service.minimum_interval.total_seconds() // 60),
    }


@app.get(_SCHEDULE, summary="Read a schedule", responses=responses((200, ScheduleView, "the schedule"), 404, 503))
def get_schedule(schedule_id: str) -> dict[str, Any]:
    return runtime().schedules.view(_owned(current_user(), schedule_id))


@app.post(
    f"{_SCHEDULE}/pause",
    summary="Pause a schedule",
    responses=responses((200, ScheduleView, "paused (already paused: unchanged)"), 404, 409, 503),
)
def pause_schedule(schedule_id: str) -> dict[str, Any]:
    """It fires no more until resumed (its Scheduler schedule is DISABLED)."""
    user = current_user()
    _owned(user, schedule_id)
    service = runtime().schedules
    return service.view(service.pause(user, schedule_id))


@app.post(
    f"{_SCHEDULE}/resume",
    summary="Resume a paused schedule",
    responses=responses((200, ScheduleView, "enabled (already enabled: unchanged)"), 404, 409, 503),
)
def resume_schedule(schedule_id: str) -> dict[str, Any]:
    """It fires again from its next firing on; the firings it missed while paused do not run."""
    user = current_user()
    _owned(user, schedule_id)
    service = runtime().schedules
    return service.view(service.resume(user, schedule_id))


@app.delete(_SCHEDULE, summary="Delete a schedule", responses=responses((204, None, "deleted"), 404, 503))
def delete_schedule(schedule_id: str) -> Response[str]:
    user = current_user()
    _owned(user, schedule_id)
    runtime().schedules.delete(user, schedule_id)
    return Response(204, "application/json", body="")
