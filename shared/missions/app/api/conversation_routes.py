"""Conversations: a user's turns and the working memory the next mission of each starts from."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError

from missions.app.api.edge import app, current_user, responses, runtime
from missions.app.api.models.conversations import ConversationList, ConversationView
from missions.core.memory.conversation import WorkingMemory

_CONVERSATION = "/conversations/<conversation_id>"


def _view(memory: WorkingMemory) -> dict[str, Any]:
    return {
        "conversation_id": memory.conversation_id,
        "turns": [turn.model_dump(mode="json") for turn in memory.turns],
        "earlier": memory.summary,
        "focus": memory.focus,
        "evidence": memory.evidence,
        "open_questions": memory.open_questions,
        "created_at": memory.created_at,
        "updated_at": memory.updated_at,
    }


@app.get("/conversations", summary="Your conversations", responses=responses((200, ConversationList, "newest first")))
def list_conversations() -> dict[str, Any]:
    return {"conversations": [_view(m) for m in runtime().conversations.list(current_user())]}


@app.get(
    _CONVERSATION,
    summary="A conversation: its turns and working memory",
    responses=responses((200, ConversationView, "the conversation"), 404),
)
def get_conversation(conversation_id: str) -> dict[str, Any]:
    found = runtime().conversations.get(current_user(), conversation_id)
    if found is None:  # another user's is as missing as one that does not exist
        raise NotFoundError(f"no conversation {conversation_id}")
    return _view(found[0])


@app.delete(
    _CONVERSATION,
    summary="Forget a conversation and its working memory",
    responses=responses((204, None, "forgotten"), 404),
)
def delete_conversation(conversation_id: str) -> Response[None]:
    if not runtime().conversations.delete(current_user(), conversation_id):
        raise NotFoundError(f"no conversation {conversation_id}")
    return Response(status_code=204)
