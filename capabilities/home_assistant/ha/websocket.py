"""Home Assistant's websocket API (developers.home-assistant.io/docs/api/websocket): what REST does not
offer, such as validating an automation before it is saved (`validate_config`), the registries, long-term
statistics and dashboards.

One connection per operation: open, authenticate with the long-lived token, send one command, read its
result, close. A stage asks a handful of such questions, so a connection kept open would buy little and
could outlive the Lambda invocation that opened it. Errors are the port's: the host named, never the token.
A connection that did not open (`WebSocketNotOpened`) sent nothing, so the caller may try again whatever the
command; one whose answer did not come (`WebSocketNoAnswer`) may have run it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from capabilities.home_assistant.ha.port import (
    HABadRequest,
    HAError,
    HATokenRejected,
    HAUnknownEntity,
    HAUnreachable,
    HAUnsupported,
)

NOT_FOUND = frozenset({"not_found", "config_not_found"})  # HA's codes for "nothing by that id or url_path"


def refusal(command: str, fields: dict[str, Any], code: str, message: str, host: str | None) -> HAError:
    """The port's error for a command HA answered with an error (its `code` and `message`), in one place so
    the sample home, answering the same commands in memory, fails in the same words."""
    text = " ".join((message or code or "refused").split())
    at = f" at {host}" if host else ""
    if code == "unknown_command":
        return HAUnsupported(f"Home Assistant{at} does not know {command}: {text}", host=host)
    if code in NOT_FOUND:  # what was missing is what the command named (a url_path, a dashboard_id)
        named = " ".join(str(v) for v in fields.values() if isinstance(v, str))
        return HAUnknownEntity(f"Home Assistant{at} found nothing for {command}: {text}", entity_id=named, host=host)
    return HABadRequest(f"Home Assistant{at} refused {command}: {text}", host=host, status=400)


class WebSocketNotOpened(HAUnreachable):
    """The connection did not open, or HA did not accept the token in time: nothing was sent."""


class WebSocketNoAnswer(HAUnreachable):
    """The command was sent and its answer did not come in time: HA may have run it."""


class HAWebSocket:
    """Commands over /api/websocket of the Home Assistant at `base_url` (http(s)://host:port/)."""

    def __init__(self, base_url: str, token: Callable[[], str], *, host: str, timeout: float = 10.0) -> None:
        scheme, _, rest = base_url.partition("://")
        self.url = f"{'wss' if scheme == 'https' else 'ws'}://{rest.rstrip('/')}/api/websocket"
        self.host = host
        self._token = token
        self._timeout = timeout

    def call(self, command: str, **fields: Any) -> Any:
        """The result of one command; HABadRequest with HA's own message when HA refuses it."""
        # imported when first used: most stages never open HA's websocket, and none pays for it at a cold start
        from websockets.exceptions import InvalidHandshake, InvalidURI, WebSocketException
        from websockets.sync.client import connect

        token = self._token()
        sent = False
        try:
            with connect(self.url, open_timeout=self._timeout, close_timeout=1, max_size=2**24) as socket:
                hello = self._read(socket)
                if hello.get("type") == "auth_required":
                    socket.send(json.dumps({"type": "auth", "access_token": token}))
                    answer = self._read(socket)
                    if answer.get("type") != "auth_ok":
                        raise HATokenRejected(
                            f"Home Assistant at {self.host} rejected the access token on its websocket API: "
                            "check HA_TOKEN, or create a new long-lived access token in your HA profile",
                            host=self.host,
                            status=401,
                        )
                socket.send(json.dumps({"id": 1, "type": command, **fields}))
                sent = True
                while True:  # events of earlier subscriptions never come: this connection made none
                    message = self._read(socket)
                    if message.get("id") == 1 and message.get("type") == "result":
                        break
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
            if sent:
                raise WebSocketNoAnswer(
                    f"Home Assistant at {self.host} did not answer {command} on its websocket API "
                    f"({type(exc).__name__} after {self._timeout:.0f} s)",
                    host=self.host,
                ) from None
            raise WebSocketNotOpened(
                f"Home Assistant at {self.host} did not open its websocket API ({type(exc).__name__})", host=self.host
            ) from None
        except WebSocketException as exc:
            raise HAError(
                f"Home Assistant at {self.host} closed its websocket API during {command} ({type(exc).__name__})",
                host=self.host,
            ) from None
        if not message.get("success"):
            error = message.get("error") or {}
            raise refusal(command, fields, str(error.get("code") or ""), str(error.get("message") or ""), self.host)
        return message.get("result")

    def _read(self, socket: Any) -> dict[str, Any]:
        raw = socket.recv(timeout=self._timeout)
        try:
            message = json.loads(raw)
        except ValueError:
            raise HAError(f"Home Assistant at {self.host} sent a websocket message that is not JSON") from None
        if not isinstance(message, dict):
            raise HAError(f"Home Assistant at {self.host} sent a websocket message that is not an object")
        return message
