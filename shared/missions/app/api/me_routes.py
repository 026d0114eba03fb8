"""You: who you are to the service, how you are told about your missions, and your data (export, erasure)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.params import Path

from missions.app.api.edge import app, current_user, is_operator, responses, runtime
from missions.app.api.models.accounts import (
    BudgetChange,
    Erasure,
    Me,
    NotificationOptIn,
    NotificationSettings,
    UserBudget,
)
from missions.app.resolver import RETRY_AFTER_SECONDS, error_body
from missions.core.accounts import EXPORT_FILENAME, EXPORT_MEDIA_TYPE
from missions.core.errors import DependencyUnavailable
from missions.service.feedback import preferences_namespace

if TYPE_CHECKING:
    from missions.service.flow.budgets import Budgets

_NOTIFICATIONS = "/me/notifications"
UserName = Annotated[str, Path(min_length=1, max_length=128, examples=["alice"])]


@app.get("/me", summary="Who you are to the service", responses=responses((200, Me, "you")))
def me() -> dict[str, Any]:
    """Your user id, the memory namespace your learned preferences live in (URL form), whether you are an
    operator, and today's spend against your daily budget."""
    user = current_user()
    budgets = runtime().budgets
    return {
        "user_id": user,
        "preferences_namespace": ":".join(preferences_namespace(user)),
        "operator": is_operator(user),
        "budget": budgets.status(user).model_dump(mode="json") if budgets is not None else None,
    }


def _budgets() -> Budgets:
    budgets = runtime().budgets
    if budgets is None:
        raise DependencyUnavailable("daily budgets are not kept here (no usage table)")
    return budgets


def _operator(user: str) -> None:
    if not is_operator(user):
        raise PermissionError("only operators read or set another user's daily budget")


@app.get(
    "/users/<user_id>/budget",
    summary="A user's daily budget and today's spend (operators)",
    responses=responses((200, UserBudget, "their day"), 403, 422, 503),
)
def user_budget(user_id: UserName) -> dict[str, Any]:
    _operator(current_user())
    return {"user_id": user_id, "started": [], **_budgets().status(user_id, fresh=True).model_dump(mode="json")}


@app.put(
    "/users/<user_id>/budget",
    summary="Set a user's daily budget (operators); a raise starts their held missions",
    responses=responses((200, UserBudget, "set"), 403, 503, body=True),
)
def set_user_budget(user_id: UserName, body: BudgetChange) -> dict[str, Any]:
    """The user's own budget in dollars a day (null: back to the environment's default). Missions held
    because their budget was spent start now if it allows them."""
    _operator(current_user())
    status = _budgets().set(user_id, body.daily_budget_usd)
    started = runtime().launcher.release_held(user_id) if not status.reached else []
    return {"user_id": user_id, "started": started, **status.model_dump(mode="json")}


@app.get(_NOTIFICATIONS, summary="Your email notices", responses=responses((200, NotificationSettings, "yours"), 503))
def notification_settings() -> dict[str, Any]:
    return runtime().notifications.settings_of(current_user())


@app.put(
    _NOTIFICATIONS,
    summary="Be told by email when a mission needs you or finishes",
    responses=responses((200, NotificationSettings, "subscribed: confirm the address"), 503, body=True),
)
def opt_in(body: NotificationOptIn) -> dict[str, Any]:
    """The address gets a link to confirm; until then `status` is pending_confirmation."""
    return runtime().notifications.opt_in(current_user(), body.email)


@app.delete(_NOTIFICATIONS, summary="Stop the email notices", responses=responses((204, None, "stopped"), 404, 503))
def opt_out() -> Response[None]:
    if not runtime().notifications.opt_out(current_user()):
        raise NotFoundError("you receive no email notices")
    return Response(status_code=204)


def _export_responses() -> dict[int, Any]:
    documented = responses((200, None, "everything stored about you"), 503)
    documented[200] = {
        "description": (
            f"JSON lines ({EXPORT_FILENAME}): a first line naming you and the format, then one "
            '`{"kind", "data"}` per record: mission (with its notes, feedback and result), event, interrupt '
            "(question and answer), artifact, queued, conversation, memory (preferences, learnings, summaries, "
            "your namespaces), repository, idempotency_record, schedule"
        ),
        "content": {EXPORT_MEDIA_TYPE: {"schema": {"type": "string"}}},
    }
    return documented


@app.get("/me/export", summary="Everything stored about you, as JSON lines", responses=_export_responses())
def export_me() -> Response[str]:
    user = current_user()
    body = "".join(runtime().accounts.export(user))  # whole before anything is sent: no half an export
    disposition = f'attachment; filename="{EXPORT_FILENAME}"'
    return Response(200, EXPORT_MEDIA_TYPE, body=body, headers={"Content-Disposition": disposition})


@app.delete(
    "/me",
    summary="Erase everything stored about you",
    responses=responses((200, Erasure, "erased: what, per store"), 503),
)
def erase_me() -> Response[dict[str, Any]]:
    """Cancels your missions that have not ended, stops your email notices, and erases your missions and
    everything of them (events, questions and answers, checkpoints, artifacts, offloaded data), your queue,
    conversations, long-term memory, repositories with every snapshot, Idempotency-Key records, and your
    schedules with their EventBridge Scheduler schedules.
    When a store fails, 503: the message says what was erased and what was not, and `detail` names each store
    not erased with its reason; running it again erases what is left."""
    report = runtime().accounts.erase(current_user())
    if report.complete:
        return Response(200, "application/json", body={"user_id": report.user_id, "erased": report.erased})
    detail = [
        {"loc": ["not_erased", store], "type": "erasure_incomplete", "message": why}
        for store, why in sorted(report.not_erased.items())
    ]
    return Response(
        503,
        "application/json",
        body=error_body(503, report.summary(), detail, app.correlation_id()),
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )
