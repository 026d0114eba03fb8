"""Double-texting: a request that names a conversation or a concurrency key while a mission of that key is
still active (not ended) follows its strategy (missions.core.mission.requests.MultitaskStrategy):

- reject: refused (KeyBusy, 409), naming the active mission; nothing is stored;
- enqueue: recorded and held behind the active mission (HELD_FOR_KEY), started when it ends;
- interrupt: the active mission is cancelled (through mission control, so its status changes only
  through the lifecycle), and the new one starts with the earlier one's goal in its context;
- rollback: the active mission is cancelled and leaves no trace in the conversation: its turn is taken
  out of the working memory, and its message out of the history the new one starts with.

One mission of a key holds it (the dispatch store's `take_key`, a conditional write on the holder the
caller saw), so two requests arriving together cannot both start: the one whose write loses reads the key
again. The holder is the key's one mission that may run; the others wait held, and the holder's end
(`Launcher.finished`, or the withdrawal of a holder that never started) hands the key to the first of them
with the same conditional write. A holder that ended without handing over (a start that failed; a crash in
between) is taken over by the next request, and the reconciler hands its key to whoever waits behind it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from missions.core.errors import ConflictError, NotFound
from missions.core.mission.requests import MissionRequest, MultitaskStrategy
from missions.core.mission.status import TERMINAL
from missions.ports.conversations import ConversationStore, VersionConflict
from missions.ports.dispatch import DispatchStore, QueueEntry
from missions.ports.missions import MissionRecord, MissionStore

log = logging.getLogger(__name__)

Action = Literal["start", "reject", "hold", "replace"]
_TAKE_ATTEMPTS = 8  # a key contended by this many requests at once is very busy: the last one is told so


class KeyBusy(ConflictError):
    """A request of a key whose active mission runs was refused (multitask_strategy `reject`)."""

    def __init__(self, key: str, active: str):
        super().__init__(f"{describe(key)} is busy with mission {active} (multitask_strategy reject): nothing started")
        self.key, self.active = key, active


def decide(strategy: MultitaskStrategy, active: str | None) -> Action:
    """What a request of a key does: start (no mission of the key is active), or what its strategy says."""
    return "start" if active is None else _ACTIONS[strategy]


_ACTIONS: dict[MultitaskStrategy, Action] = {
    MultitaskStrategy.REJECT: "reject",
    MultitaskStrategy.ENQUEUE: "hold",
    MultitaskStrategy.INTERRUPT: "replace",
    MultitaskStrategy.ROLLBACK: "replace",
}


def describe(key: str) -> str:
    kind, _, name = key.partition(":")
    return f"conversation {name}" if kind == "conversation" else f"concurrency key {name}"


@dataclass(frozen=True)
class Admission:
    """What a request of a key may do now: start, be held behind `active`, or start once `replaced` (the
    active mission, cancelled first) has given up the key."""

    action: Action
    active: MissionRecord | None = None


class Keys:
    """The holders of users' keys, over the dispatch store; `cancel` stops a replaced mission (mission
    control's cancel: the one owner of a mission's status)."""

    def __init__(
        self,
        store: DispatchStore,
        missions: MissionStore,
        cancel: Callable[[MissionRecord, str], object] | None = None,
    ):
        self._store, self._missions, self._cancel = store, missions, cancel

    def admit(self, request: MissionRequest, key: str, strategy: MultitaskStrategy) -> Admission:
        """Take the key for the request's mission when no mission of it is active; else what its strategy
        says (KeyBusy for reject). Nothing is written but the key's holder."""
        assert request.mission_id is not None, "the launcher names the mission first"
        for _ in range(_TAKE_ATTEMPTS):
            holder = self._store.key_holder(request.user_id, key)
            if holder == request.mission_id:  # a retried request: the dispatcher finds it a duplicate
                return Admission("start")
            active = self.active(holder)
            action = decide(strategy, active.mission_id if active is not None else None)
            if action == "reject":
                assert active is not None
                raise KeyBusy(key, active.mission_id)
            if action == "hold":
                return Admission("hold", active)
            if not self._store.take_key(request.user_id, key, request.mission_id, expected=holder):
                continue  # another request took it first: read it again
            if action == "replace":  # taken first, so the replaced one's end hands nothing over to those waiting
                assert active is not None
                self._replace(active, strategy, request.mission_id)
            return Admission(action, active)
        raise KeyBusy(key, self._store.key_holder(request.user_id, key) or "unknown")

    def holder(self, user_id: str, key: str) -> str | None:
        return self._store.key_holder(user_id, key)

    def ended(self, holder: str | None) -> bool:
        """Whether the key's holder no longer runs (none, or it ended): its key is the next one's to take."""
        return self.active(holder) is None

    def cancel(self, record: MissionRecord, reason: str) -> bool:
        """Cancel a mission of a key (through mission control); False when it had ended already."""
        if self._cancel is None:
            raise ConflictError(f"missions cannot be cancelled here: {record.mission_id} stays active")
        try:
            self._cancel(record, reason)
            return True
        except ConflictError:
            return False

    def active(self, holder: str | None) -> MissionRecord | None:
        """The holder's record while it has not ended; None when there is none (or it ended: stale)."""
        if holder is None:
            return None
        try:
            record = self._missions.get(holder)
        except NotFound:
            return None
        return None if record.status in TERMINAL else record

    def _replace(self, active: MissionRecord, strategy: MultitaskStrategy, newer: str) -> None:
        reason = "interrupted" if strategy is MultitaskStrategy.INTERRUPT else "rolled_back"
        if not self.cancel(active, reason):  # it ended meanwhile: nothing to cancel
            log.info("mission %s ended before %s could replace it", active.mission_id, newer)

    def next_holder(self, user_id: str, key: str, ended: str | None, held: list[QueueEntry]) -> QueueEntry | None:
        """The ended mission's key (or a key nobody holds: `ended` None) goes to the first mission held behind
        it (returned: the caller releases it), or is freed when none waits. Nothing changes when the ended
        mission no longer held the key (a newer one replaced it)."""
        waiting = [entry for entry in held if entry.request.flow_key() == key and entry.mission_id != ended]
        if waiting:
            first = waiting[0]
            return first if self._store.take_key(user_id, key, first.mission_id, expected=ended) else None
        if ended is not None:
            self._store.drop_key(user_id, key, ended)
        return None

    def stranded(self, held: list[QueueEntry]) -> list[tuple[QueueEntry, str | None]]:
        """Held entries whose key's holder ended, or which hold their key themselves and still wait (a crash
        between the hand-over and the release), with the holder to replace: what the reconciler hands over."""
        found: list[tuple[QueueEntry, str | None]] = []
        seen: set[tuple[str, str]] = set()
        for entry in held:
            key = entry.request.flow_key()
            if key is None or (entry.user_id, key) in seen:
                continue
            seen.add((entry.user_id, key))
            holder = self._store.key_holder(entry.user_id, key)
            if holder == entry.mission_id or self.active(holder) is None:
                found.append((entry, holder))
        return found


def forget_turn(conversations: ConversationStore, user_id: str, conversation_id: str, mission_id: str) -> None:
    """Take a rolled-back mission's turn out of its conversation's working memory (if it was folded in), and
    the chat's wait for it."""
    for _ in range(_TAKE_ATTEMPTS):
        found = conversations.get(user_id, conversation_id)
        if found is None:
            return
        memory, version = found
        turns = [turn for turn in memory.turns if turn.mission_id != mission_id]
        if len(turns) == len(memory.turns) and memory.awaiting != mission_id:
            return
        awaiting = None if memory.awaiting == mission_id else memory.awaiting
        try:
            conversations.put(memory.model_copy(update={"turns": turns, "awaiting": awaiting}), version)
            return
        except VersionConflict:
            continue
    raise VersionConflict(f"conversation {conversation_id} kept changing: mission {mission_id} was not forgotten")


def without_message(context: dict[str, Any], goal: str) -> dict[str, Any]:
    """The context with the latest user message that asked for `goal` taken out of its chat history (a
    rolled-back mission's: the new one starts as if it was never sent)."""
    chat = context.get("chat")
    if not (isinstance(chat, dict) and isinstance(chat.get("history"), list)):
        return context
    history = list(chat["history"])
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if isinstance(message, dict) and message.get("role") == "user" and message.get("content") == goal:
            del history[index]
            break
    return {**context, "chat": {**chat, "history": history}}


def interrupted_context(context: dict[str, Any], interrupted: MissionRecord) -> dict[str, Any]:
    """The new mission's context with the interrupted one's input in it."""
    return {
        **context,
        "interrupted": {"mission_id": interrupted.mission_id, "goal": interrupted.goal, "status": interrupted.status},
    }


__all__ = [
    "Admission",
    "KeyBusy",
    "Keys",
    "decide",
    "describe",
    "forget_turn",
    "interrupted_context",
    "without_message",
]
