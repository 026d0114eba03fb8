"""A user's long-term memory: namespaced items they can read, write, search and delete."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.params import Query

from missions.app.api.edge import app, current_user, responses, runtime
from missions.app.api.models.memory import MemoryItemView, MemoryList, MemoryValue
from missions.core.memory.longterm import MemoryItem

_ITEM = "/memory/<namespace>/<key>"


def namespace_of(raw: str) -> tuple[str, ...]:
    """URL form: segments joined by ':' (e.g. 'user_preferences:dining')."""
    return tuple(raw.split(":"))


def _item(item: MemoryItem, score: float | None = None) -> dict[str, Any]:
    shown = item.model_dump(mode="json", exclude={"user_id"})
    if score is not None:
        shown["score"] = round(score, 4)
    return shown


@app.get(_ITEM, summary="Read a memory item", responses=responses((200, MemoryItemView, "the item"), 404, 422))
def memory_get(namespace: str, key: str) -> dict[str, Any]:
    user = current_user()
    item = runtime().memory.get(user, namespace_of(namespace), key)  # a bad name is MemoryValidationError: 422
    if item is None:
        raise NotFoundError(f"no item {key} in {namespace}")
    return _item(item)


@app.put(
    _ITEM,
    summary="Write a memory item (memory triggers may start missions)",
    responses=responses((200, MemoryItemView, "stored"), 503, body=True),
)
def memory_put(namespace: str, key: str, body: MemoryValue) -> dict[str, Any]:
    user = current_user()
    runtime().service.remember_user(user)
    item = runtime().memory.put(user, namespace_of(namespace), key, body.value)
    return _item(item)


@app.delete(_ITEM, summary="Delete a memory item", responses=responses((204, None, "deleted"), 404, 422))
def memory_delete(namespace: str, key: str) -> Response[str]:
    user = current_user()
    if not runtime().memory.delete(user, namespace_of(namespace), key):
        raise NotFoundError(f"no item {key} in {namespace}")
    return Response(204, "application/json", body="")


@app.get(
    "/memory/<namespace>",
    summary="List or search a namespace",
    responses=responses((200, MemoryList, "items, best match first when searching"), 422, 503),
)
def memory_list(
    namespace: str,
    query: Annotated[str | None, Query(min_length=1, max_length=1000)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> dict[str, Any]:
    user = current_user()
    memory = runtime().memory
    if query:
        found = memory.search(user, namespace_of(namespace), query, limit=limit)
        return {"items": [_item(i, s) for i, s in found]}
    return {"items": [_item(i) for i in memory.list(user, namespace_of(namespace), limit=limit)]}
