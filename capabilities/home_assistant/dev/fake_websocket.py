"""The fake HA's websocket API (/api/websocket): HA's handshake (auth_required, auth, auth_ok or
auth_invalid) and its commands answered from the sample home, over a real websocket.

The fake server is http.server in threads, so the upgraded connection is driven here with websockets'
sans-I/O server protocol on the request's own socket: one thread per connection, as for HTTP.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from datetime import datetime
from typing import Any

from websockets.frames import Frame, Opcode
from websockets.http11 import Request
from websockets.server import ServerProtocol

from capabilities.home_assistant.dev.sample import SampleHome
from capabilities.home_assistant.dev.sample_dashboards import CommandRefused
from capabilities.home_assistant.ha.port import HABadRequest, HAError

HA_VERSION_FIELD = "ha_version"


def commands(home: SampleHome) -> dict[str, Callable[[dict[str, Any]], Any]]:
    """The websocket commands the fake answers, by type."""
    return {
        "validate_config": lambda fields: home.validate_config(fields),
        "get_config": lambda fields: home.config().model_dump(mode="json"),
        "recorder/statistics_during_period": lambda fields: _statistics(home, fields),
        "config/area_registry/list": lambda fields: [a.model_dump() for a in home.registries().areas],
        "config/device_registry/list": lambda fields: [d.model_dump() for d in home.registries().devices],
        "config/entity_registry/list": lambda fields: [e.model_dump() for e in home.registries().entities],
        **home.lovelace_commands(),  # the dashboards: lovelace/dashboards/list, create, delete; lovelace/config, save
    }


def _statistics(home: SampleHome, fields: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """As HA answers it: per statistic id, each period with `start`/`end` in milliseconds since the epoch."""
    try:
        start = datetime.fromisoformat(fields["start_time"])
        end = datetime.fromisoformat(fields["end_time"]) if fields.get("end_time") else home.now
        ids, period = fields["statistic_ids"], fields["period"]
    except (KeyError, ValueError) as exc:
        raise HABadRequest(f"invalid statistics request: {exc}") from None
    answer = home.statistics(ids, start, end, period=period)
    return {
        statistic_id: [
            {
                **point.model_dump(exclude={"start", "end"}, exclude_none=True),
                "start": int(point.start.timestamp() * 1000),
                "end": int(point.end.timestamp() * 1000),
            }
            for point in points
        ]
        for statistic_id, points in answer.items()
    }


def serve_websocket(
    connection: socket.socket, path: str, headers: Any, token: str, home: SampleHome, lock: Any
) -> None:
    """Upgrade the request on `connection` and answer HA's websocket protocol until the client closes."""
    protocol = ServerProtocol()
    # the request http.server has read, handed to the protocol as the bytes it came in
    lines = [f"GET {path} HTTP/1.1", *(f"{name}: {value}" for name, value in headers.items()), "", ""]
    protocol.receive_data("\r\n".join(lines).encode("latin-1"))
    (request,) = [event for event in protocol.events_received() if isinstance(event, Request)]
    response = protocol.accept(request)
    protocol.send_response(response)
    if not _flush(connection, protocol) or response.status_code != 101:
        return
    _send(protocol, {"type": "auth_required", HA_VERSION_FIELD: home.config().version})
    authenticated = False
    known = commands(home)
    while _flush(connection, protocol):
        try:
            data = connection.recv(65536)
        except OSError:
            return
        if data:
            protocol.receive_data(data)
        else:
            protocol.receive_eof()
        for frame in protocol.events_received():
            if not isinstance(frame, Frame) or frame.opcode != Opcode.TEXT:
                continue
            message = json.loads(bytes(frame.data))
            if not authenticated:
                authenticated = message.get("type") == "auth" and message.get("access_token") == token
                answer = "auth_ok" if authenticated else "auth_invalid"
                _send(protocol, {"type": answer, HA_VERSION_FIELD: home.config().version})
                if not authenticated:
                    protocol.send_close(1008)
                continue
            _send(protocol, _result(message, known, lock))


def _result(message: dict[str, Any], known: dict[str, Callable[[dict[str, Any]], Any]], lock: Any) -> dict[str, Any]:
    ident, kind = message.get("id"), message.get("type")
    fields = {k: v for k, v in message.items() if k not in ("id", "type")}
    if kind not in known:
        return _error(ident, "unknown_command", "Unknown command.")
    try:
        with lock:
            result = known[str(kind)](fields)
    except CommandRefused as exc:  # the sample answered as HA does: its code and message
        return _error(ident, exc.code, exc.message)
    except HABadRequest as exc:
        return _error(ident, "invalid_format", str(exc))
    except HAError as exc:
        return _error(ident, "unknown_error", str(exc))
    return {"id": ident, "type": "result", "success": True, "result": result}


def _error(ident: Any, code: str, text: str) -> dict[str, Any]:
    return {"id": ident, "type": "result", "success": False, "error": {"code": code, "message": text}}


def _send(protocol: ServerProtocol, message: dict[str, Any]) -> None:
    protocol.send_text(json.dumps(message).encode())


def _flush(connection: socket.socket, protocol: ServerProtocol) -> bool:
    """Write what the protocol has to send; False once the connection is to be closed."""
    for data in protocol.data_to_send():
        if not data:  # the protocol's signal to close the TCP connection
            return False
        try:
            connection.sendall(data)
        except OSError:
            return False
    return protocol.state.name != "CLOSED"
