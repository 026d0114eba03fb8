"""OpenAPI links: from each response that gives an id to every operation that takes it.

A client (or schemathesis's stateful phase) reads them to chain calls: the mission POST /missions
created is the one GET /missions/{mission_id} reads, its question the one POST .../interrupts/
{interrupt_id} answers. Powertools declares a link only on the route that gives the id, and the routes
that take one are spread over the modules, so the links are drawn here, in one pass over the finished
document: a source names what a response gives (`GIVES`); every operation whose path parameters it then
has, and that takes at least one of them (as a path parameter, a query parameter or a body field), gets
a link, as do the operations a source names (opting out follows opting in). A new route that takes
`{mission_id}` is linked with no change here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.event_handler.openapi.models import Link as OpenAPILink
from aws_lambda_powertools.event_handler.openapi.models import (
    OpenAPI,
    Operation,
    Parameter,
    ParameterInType,
    Reference,
)

_METHODS = ("get", "put", "post", "delete", "patch")
_PARAMETER = re.compile(r"{(\w+)}")


@dataclass(frozen=True)
class Gives:
    """What the `status` response of `method path` gives a next call: a value for each name, taken by a
    path parameter or a body field of that name (only by a path parameter when named `path.<name>`, by a
    query parameter when named `query.<name>`); values are OpenAPI runtime expressions."""

    method: str
    path: str
    status: int
    values: dict[str, str]
    leads_to: tuple[str, ...] = ()  # operations taking none of the values that this response makes possible


def _body(pointer: str) -> str:
    return f"$response.body#{pointer}"


def _same(name: str) -> str:
    return f"$request.path.{name}"


GIVES = (
    # missions: created, forked, listed, waiting for an answer; and the states a call leaves one in
    Gives("post", "/missions", 202, {"mission_id": _body("/mission_id")}),
    Gives("post", "/missions/{mission_id}/fork", 202, {"mission_id": _body("/mission_id")}),
    Gives("get", "/missions", 200, {"mission_id": _body("/missions/0/mission_id")}),
    Gives(  # what it says (waiting, paused, ended) is what can be done next: answer, resume, rate
        "get",
        "/missions/{mission_id}",
        200,
        {"mission_id": _same("mission_id"), "interrupt_id": _body("/pending_interrupt/interrupt_id")},
    ),
    Gives(
        "get",
        "/inbox",
        200,
        {"mission_id": _body("/items/0/mission_id"), "interrupt_id": _body("/items/0/question/interrupt_id")},
    ),
    Gives("get", "/missions/{mission_id}/checkpoints", 200, {"checkpoint_id": _body("/checkpoints/0/checkpoint_id")}),
    Gives("get", "/missions/{mission_id}/artifacts", 200, {"query.path": _body("/artifacts/0/path")}),
    Gives("post", "/missions/{mission_id}/pause", 202, {"mission_id": _same("mission_id")}),  # to resume
    Gives("post", "/missions/{mission_id}/cancel", 200, {"mission_id": _same("mission_id")}),  # ended: to rate
    # repositories, schedules, conversations, memory items
    Gives("post", "/repositories", 201, {"repository_id": _body("/repository_id")}),
    Gives("post", "/repositories", 202, {"repository_id": _body("/repository_id")}),
    Gives("get", "/repositories", 200, {"repository_id": _body("/repositories/0/repository_id")}),
    Gives("post", "/schedules", 201, {"schedule_id": _body("/schedule_id")}),
    Gives("get", "/schedules", 200, {"schedule_id": _body("/schedules/0/schedule_id")}),
    Gives("post", "/schedules/{schedule_id}/pause", 200, {"schedule_id": _same("schedule_id")}),  # to resume
    Gives("get", "/conversations", 200, {"conversation_id": _body("/conversations/0/conversation_id")}),
    Gives("put", "/memory/{namespace}/{key}", 200, {"namespace": _same("namespace"), "key": _same("key")}),
    Gives("put", "/me/notifications", 200, {}, leads_to=("DELETE /me/notifications",)),
    Gives("get", "/me", 200, {"path.user_id": _body("/user_id")}),  # an operator's own budget
    Gives("get", "/users/{user_id}/budget", 200, {"user_id": _same("user_id")}),  # to set it
    # capabilities and their agents' versions
    Gives(
        "get",
        "/capabilities",
        200,
        {
            "path.name": _body("/capabilities/0/name"),
            "capability": _body("/capabilities/0/name"),
            "path.trigger": _body("/capabilities/0/triggers/0"),
        },
    ),
    Gives("get", "/agents/{capability}", 200, {"agent": _body("/agents/0/agent")}),
    Gives("get", "/triggers/{trigger}/decisions", 200, {"mission_id": _body("/decisions/0/mission_id")}),
    Gives("post", "/agents/{capability}/{agent}/versions", 201, {"version": _body("/version")}),
    Gives("post", "/agents/{capability}/{agent}/versions/{version}/clone", 201, {"version": _body("/version")}),
    Gives("post", "/agents/{capability}/{agent}/promote", 200, {"agent": _same("agent")}),  # to roll back
    Gives("post", "/agents/{capability}/{agent}/disable", 200, {"agent": _same("agent")}),  # to enable
)


def _operations(schema: OpenAPI) -> dict[tuple[str, str], Operation]:
    found: dict[tuple[str, str], Operation] = {}
    for path, item in (schema.paths or {}).items():
        for method in _METHODS:
            operation = getattr(item, method, None)
            if operation is not None:
                found[(method, path)] = operation
    return found


def _body_fields(schema: OpenAPI, operation: Operation) -> set[str]:
    """The top-level fields of the operation's JSON body (its model's, through one reference)."""
    body = operation.requestBody
    if body is None or isinstance(body, Reference):
        return set()
    media = body.content.get("application/json")
    model: Any = media.schema_ if media is not None else None
    reference = getattr(model, "ref", None)
    if reference:
        model = ((schema.components.schemas if schema.components else None) or {}).get(reference.rsplit("/", 1)[-1])
    return set(getattr(model, "properties", None) or {})


def _query(operation: Operation) -> set[str]:
    return {p.name for p in operation.parameters or [] if isinstance(p, Parameter) and p.in_ == ParameterInType.query}


def _link(schema: OpenAPI, source: Gives, method: str, target_path: str, target: Operation) -> OpenAPILink | None:
    """The link to `target` when the source's response and request give every path parameter it takes,
    and it takes at least one of what the response gives (or the source names it); None otherwise."""
    given = {name.removeprefix("path."): v for name, v in source.values.items() if not name.startswith("query.")}
    takes = _PARAMETER.findall(target_path)
    fields = _body_fields(schema, target) & {name for name in source.values if "." not in name}
    queries = {name for name in source.values if name.startswith("query.") and name[6:] in _query(target)}
    named = f"{method.upper()} {target_path}" in source.leads_to
    have = set(_PARAMETER.findall(source.path)) | set(given)
    if any(name not in have for name in takes) or not (set(takes) & set(given) or fields or queries or named):
        return None
    parameters = {f"path.{name}": given.get(name) or _same(name) for name in takes}
    parameters |= {name: source.values[name] for name in sorted(queries)}
    body = {name: source.values[name] for name in sorted(fields)} or None
    return OpenAPILink(operationId=target.operationId, parameters=parameters or None, requestBody=body)


def link_operations(schema: OpenAPI, gives: Sequence[Gives] = GIVES) -> OpenAPI:
    """Add to each response in `gives` a link to every operation it can feed (the document, changed)."""
    operations = _operations(schema)
    for source in gives:
        operation = operations.get((source.method, source.path))
        response = (operation.responses or {}).get(source.status) if operation is not None else None
        if response is None:
            raise LookupError(f"no {source.status} response of {source.method.upper()} {source.path} to link from")
        links = dict(response.links or {})
        for (method, path), target in operations.items():
            link = _link(schema, source, method, path, target)
            if link is not None and target.operationId:
                links[target.operationId] = link
        response.links = links or None
    return schema


__all__ = ["GIVES", "Gives", "link_operations"]
