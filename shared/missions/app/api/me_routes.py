"""You: who you are to the service, and how you are told about your missions."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError

from missions.app.api.edge import app, current_user, is_operator, responses, runtime
from missions.app.api.models import Me, NotificationOptIn, NotificationSettings
from missions.service.feedback import preferences_namespace

_NOTIFICATIONS = "/me/notifications"


@app.get("/me", summary="Who you are to the service", responses=responses((200, Me, "you")))
def me() -> dict[str, Any]:
    """Your user id, the memory namespace your learned preferences live in (URL form), and whether you
    are an operator."""
    user = current_user()
    return {
        "user_id": user,
        "preferences_namespace": ":".join(preferences_namespace(user)),
        "operator": is_operator(user),
    }


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
