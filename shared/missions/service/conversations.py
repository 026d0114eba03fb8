"""The conversations service: what a mission that is a turn of a conversation leaves in the conversation's
working memory (missions.core.memory.conversation) when it ends.

The stage that ends the mission folds its turn in before the end is recorded, so a failing write retries
that stage and loses nothing; the fold is therefore idempotent (a turn already folded is not folded
again, whoever retries), and a mission of the same conversation ending at the same time is read again
(optimistic versions, ports.conversations)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from missions.core.memory.conversation import CONTEXT_KEY, MAX_EVIDENCE, MAX_FOCUS, Turn, WorkingMemory, fold
from missions.core.mission.envelope import Envelope
from missions.core.mission.notes import texts as note_texts
from missions.ports.conversations import ConversationStore, VersionConflict

_FOLD_ATTEMPTS = 5


class ConversationService:
    def __init__(self, store: ConversationStore):
        self.store = store

    def fold_mission(
        self, envelope: Envelope, ended: str, result: Mapping[str, Any], final_output: Mapping[str, Any]
    ) -> None:
        """Fold an ended mission into its conversation, if it is a turn of one: its goal, its answer and
        citations (from `result`, what its record keeps), and what its capability keeps in focus (the
        final stage's `focus`: entities, files)."""
        remembered = envelope.context.get(CONTEXT_KEY)
        if not isinstance(remembered, dict):
            return
        conversation_id = str(remembered.get("id"))
        answer = result.get("answer") if isinstance(result.get("answer"), str) else ""
        turn = Turn(
            mission_id=envelope.mission_id,
            capability=envelope.capability,
            goal=envelope.raw_input,
            answer=answer or "",
            status=ended,
            notes=note_texts(envelope.context),
        )
        cited = [str(ref) for ref in result.get("citations") or []][:MAX_EVIDENCE]
        kept = final_output.get("focus")
        focus = [str(name) for name in kept][:MAX_FOCUS] if isinstance(kept, list) else []
        for _ in range(_FOLD_ATTEMPTS):
            found = self.store.get(envelope.user_id, conversation_id)
            memory, version = found or (WorkingMemory(conversation_id=conversation_id, user_id=envelope.user_id), 0)
            if any(t.mission_id == envelope.mission_id for t in memory.turns):
                return  # an earlier attempt of the stage folded it
            try:
                self.store.put(fold(memory, turn, citations=cited, focus=focus), version)
                return
            except VersionConflict:
                continue
        raise VersionConflict(f"conversation {conversation_id} kept changing: the turn was not folded")
