"""A conversation: the turns of missions that share a working memory."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ConversationTurn(BaseModel):
    mission_id: str
    capability: str
    goal: str
    answer: str
    status: str
    notes: list[str] = Field(default_factory=list, description="what you told that turn's mission while it ran")
    at: str


class ConversationView(BaseModel):
    conversation_id: str
    turns: list[ConversationTurn]
    earlier: list[str] = Field(description="older turns, one line each")
    focus: list[str] = Field(description="entities, files and symbols in focus, newest first")
    evidence: list[str]
    open_questions: list[str]
    created_at: str
    updated_at: str


class ConversationList(BaseModel):
    conversations: list[ConversationView]


__all__ = [
    "ConversationList",
    "ConversationTurn",
    "ConversationView",
]
