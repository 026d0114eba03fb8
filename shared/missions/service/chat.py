"""The chat entry: a chat message becomes a turn of a conversation, run as a mission.

`ChatService.begin` decides what a message is (missions.app.chat_wire has the wire format):
- the answer to the question the conversation's mission is waiting on ("approve", "option 2", a
  clarification): it is answered once, through the same path as the HTTP API, and the chat follows
  that mission on; a message that does not answer it is asked again, and nothing changes;
- otherwise a new goal: a mission of the named capability (or the one the runtime chooses, the
  conversation's last one when the goal names none), started through the launcher with the earlier
  messages and the conversation's working memory as its context.

A conversation runs one mission at a time (its key, missions.service.flow.multitask): the next turn starts
from the working memory the last one folded in. So when a mission outlived the last reply's wait (the chat
answered with its status), the next message follows the conversation's strategy (the capability's, or the
request's `multitask_strategy`): enqueue (the default) holds the new mission until that one ends, follows
that one to its end and hands over its result, then follows its own; reject refuses the message (409);
interrupt and rollback cancel that one and start the new one in its place.

`ChatService.follow` polls the mission's events and status until it ends, asks, or the wait runs
out, yielding progress lines (stages, tool calls) and ticks (for heartbeats) and then the reply.
Every reply is remembered by its digest in the conversation, so a client that sends the history
back without naming the conversation continues it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from missions.core.chat import (
    AUTO_MODEL,
    MAX_REPLIES,
    ChatMessageIn,
    UnknownConversation,
    UnknownModel,
    interpret_answer,
    question_text,
    reply_digest,
    usage_of,
)
from missions.core.cost.budget import HELD_FOR_BUDGET
from missions.core.errors import ConflictError, NotFound
from missions.core.memory.conversation import WorkingMemory
from missions.core.mission.events import Event, EventType
from missions.core.mission.requests import MissionRequest
from missions.core.mission.status import TERMINAL, MissionStatus
from missions.core.triggers.declared import TriggerSource
from missions.ports.conversations import ConversationStore, VersionConflict
from missions.ports.events import EventStore
from missions.ports.interrupts import InterruptRecord, InterruptStore
from missions.ports.missions import MissionRecord, MissionStore, running_stage
from missions.service.interrupts import waiting_question, waiting_questions
from missions.service.progress import MissionProgress

POLL_SECONDS = 0.25
_UPDATE_ATTEMPTS = 8


@dataclass(frozen=True)
class Progress:
    """A line of what the mission is doing (a stage began, a tool ran)."""

    text: str


@dataclass(frozen=True)
class Reply:
    """The assistant's reply, and what it is about."""

    content: str
    mission_id: str | None
    status: str  # the mission's status when the reply was made ("asking": it waits for the user)
    usage: dict[str, int] = field(default_factory=lambda: usage_of(None))


Tick = None  # nothing new this poll: a moment to send a heartbeat
Step = Progress | Reply | None


@dataclass
class ChatTurn:
    user_id: str
    conversation_id: str
    model: str
    request: ChatMessageIn
    completion_id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex}")
    created: int = field(default_factory=lambda: int(time.time()))
    awaited: str | None = None  # a mission of an earlier turn to follow to its end first
    answered: tuple[str, str] | None = None  # (mission, interrupt) this message answered
    reask: str | None = None  # the message did not answer the waiting question: say this instead
    mission_id: str | None = None  # the mission this turn follows (known once it started)


def progress_of(event: Event) -> str | None:
    """What a user following the mission is told of an event (None: nothing worth a line). A stage's
    start is told from the mission's record as it begins (`ChatService._begun`), not from its event, which is
    written when the stage ends."""
    payload = event.payload
    if event.type is EventType.TOOL_STARTED:
        return f"  · {payload.get('tool') or payload.get('name') or 'tool'}"
    if event.type is EventType.ANALYSIS_COMPLETED:
        return f"  · analysis {payload.get('status', '')}".rstrip()
    if event.type is EventType.INTERRUPT_ANSWERED:
        return "  · answer received"
    if event.type is EventType.MISSION_QUEUED:
        if payload.get("detail"):  # held, and why (missions.core.cost.budget)
            return f"  · held: {payload['detail']}"
        return "  · queued behind your running missions"
    return None


class ChatService:
    def __init__(
        self,
        *,
        missions: MissionStore,
        events: EventStore,
        interrupts: InterruptStore,
        conversations: ConversationStore,
        submit: Callable[[MissionRequest], Any],
        answer: Callable[..., Any],
        choose_capability: Callable[[str, str | None, str | None], str],
        capabilities: Callable[[], list[str]],
        first_stage: Callable[[str], str | None] = lambda capability: None,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        poll_seconds: float = POLL_SECONDS,
        progress: MissionProgress | None = None,
    ):
        """`progress`: where a running mission's stages got to (missions.service.progress)."""
        self.missions, self.events, self.interrupts, self.conversations = missions, events, interrupts, conversations
        self._progress = progress
        self._submit, self._answer, self._choose = submit, answer, choose_capability
        self._capabilities, self._first_stage = capabilities, first_stage
        self._monotonic, self._sleep, self.poll_seconds = monotonic, sleep, poll_seconds

    # -- models ------------------------------------------------------------------------------------

    def models(self) -> list[str]:
        """What `model` may name: `missions` (the runtime chooses) and each installed capability."""
        return [AUTO_MODEL, *self._capabilities()]

    # -- a message -----------------------------------------------------------------------------------

    def begin(self, user_id: str, request: ChatMessageIn, named: str | None = None) -> ChatTurn:
        """What this message is (see the module's docstring). UnknownModel, UnknownConversation (both
        NotFound) or a MissionRequestError when it cannot be taken; nothing has changed then."""
        if request.model not in self.models():
            raise UnknownModel(f"The model '{request.model}' does not exist; GET /v1/models lists them")
        memory = self._conversation(user_id, request, named)
        turn = ChatTurn(user_id=user_id, conversation_id=memory.conversation_id, model=request.model, request=request)
        awaited = self._awaited(memory)
        if awaited is not None:
            asking = self._asking(awaited)
            if asking is not None:
                answer = interpret_answer(asking.kind, asking.options, request.goal)
                if isinstance(answer, str):
                    turn.reask, turn.mission_id = answer, awaited.mission_id
                    return turn
                try:
                    self._answer(awaited.mission_id, asking.interrupt_id, answer)
                except ConflictError:
                    pass  # answered meanwhile (another tab): follow the mission on all the same
                turn.answered, turn.mission_id = (awaited.mission_id, asking.interrupt_id), awaited.mission_id
                return turn
            # the conversation's strategy decides (the launcher): held until that one ends (enqueue), refused
            # (reject: KeyBusy), or started in its place (interrupt, rollback: that one is cancelled)
            turn.mission_id = self._start(turn)
            if self.missions.get(awaited.mission_id).status != MissionStatus.CANCELLED:
                turn.awaited = awaited.mission_id  # followed to its end first, then this one
            return turn
        turn.mission_id = self._start(turn)  # a goal that cannot run is refused here, before anything is stored
        return turn

    def follow(self, turn: ChatTurn, wait_seconds: float) -> Iterator[Step]:
        """Progress, ticks, and last the reply (remembered in the conversation before it is yielded)."""
        deadline = self._monotonic() + wait_seconds
        if turn.reask is not None:
            yield self._conclude(turn, Reply(turn.reask, turn.mission_id, MissionStatus.INTERRUPTED))
            return
        earlier = ""
        assert turn.mission_id is not None, "begin started (or held) this message's mission"
        if turn.awaited is not None:
            reply = yield from self._watch(turn.awaited, None, deadline, skip=None)
            if reply.status not in TERMINAL:  # the new one waits for it: the chat owes the new one's reply next
                note = f"\n\n(Your new message waits for it: mission {turn.mission_id} starts when it ends.)"
                yield self._conclude(turn, Reply(reply.content + note, turn.mission_id, reply.status, reply.usage))
                return
            goal = self.missions.get(turn.awaited).goal[:120]
            earlier = f"**Your earlier request** ({goal}):\n\n{reply.content}\n\n---\n\n"
        cursor = self._position_now(turn.mission_id) if turn.answered else None
        skip = turn.answered[1] if turn.answered else None
        reply = yield from self._watch(turn.mission_id, cursor, deadline, skip=skip)
        yield self._conclude(turn, Reply(earlier + reply.content, reply.mission_id, reply.status, reply.usage))

    # -- the conversation ------------------------------------------------------------------------

    def _conversation(self, user_id: str, request: ChatMessageIn, named: str | None) -> WorkingMemory:
        """The conversation this message continues, or a new one (stored when its first mission starts)."""
        named = named or request.conversation_id
        if named is not None:
            found = self.conversations.get(user_id, named)
            if found is not None:
                return found[0]
            if request.last_reply is not None:  # continuing a conversation this user does not have
                raise UnknownConversation(f"No conversation '{named}'")
            return WorkingMemory(conversation_id=named, user_id=user_id)
        if request.last_reply is not None:
            digest = reply_digest(request.last_reply)
            for memory in self.conversations.list(user_id, limit=200):
                if digest in memory.replies:
                    return memory
        return WorkingMemory(conversation_id=f"conv_{uuid.uuid4().hex[:20]}", user_id=user_id)

    def _update(self, user_id: str, conversation_id: str, change: Callable[[WorkingMemory], WorkingMemory]) -> None:
        for _ in range(_UPDATE_ATTEMPTS):
            found = self.conversations.get(user_id, conversation_id)
            memory, version = found or (WorkingMemory(conversation_id=conversation_id, user_id=user_id), 0)
            try:
                self.conversations.put(change(memory), version)
                return
            except VersionConflict:
                continue
        raise VersionConflict(f"conversation {conversation_id} kept changing")

    def _awaited(self, memory: WorkingMemory) -> MissionRecord | None:
        if memory.awaiting is None:
            return None
        try:
            record = self.missions.get(memory.awaiting)
        except NotFound:
            return None
        return record if record.user_id == memory.user_id else None

    def _asking(self, record: MissionRecord) -> InterruptRecord | None:
        return waiting_question(self.interrupts, record)

    # -- a mission -----------------------------------------------------------------------------------

    def _start(self, turn: ChatTurn) -> str:
        request = turn.request
        found = self.conversations.get(turn.user_id, turn.conversation_id)
        memory = found[0] if found else WorkingMemory(conversation_id=turn.conversation_id, user_id=turn.user_id)
        last = memory.turns[-1].capability if memory.turns else None
        requested = None if request.model == AUTO_MODEL else request.model
        capability = self._choose(request.goal, requested, last)
        kept = {**memory.mission_context, **(request.context or {})}
        context: dict[str, Any] = {**kept, "chat": {"history": request.history()}}
        mission = MissionRequest.parse(
            capability=capability,
            goal=request.goal,
            user_id=turn.user_id,
            context=context,
            trigger=TriggerSource.CHAT,
            conversation_id=turn.conversation_id,
            model=request.mission_model,
            multitask_strategy=request.multitask_strategy,
        )
        mission_id = str(self._submit(mission).mission_id)
        self._update(
            turn.user_id,
            turn.conversation_id,
            lambda m: m.model_copy(update={"awaiting": mission_id, "mission_context": kept}),
        )
        return mission_id

    def _position_now(self, mission_id: str) -> str | None:
        """The last event's cursor: a resumed mission is followed from what happens next."""
        cursor: str | None = None
        while True:
            events, last = self.events.read(mission_id, after=cursor, limit=500)
            if not events:
                return cursor
            cursor = last

    def _watch(
        self, mission_id: str, cursor: str | None, deadline: float, *, skip: str | None
    ) -> Generator[Step, None, Reply]:
        """Follow one mission: progress lines and ticks; returns the reply it came to."""
        announced: tuple[int, str] | None = None  # (stages run before it, stage) the record last showed
        ahead: list[str] = []  # stages told as beginning (from the record) whose own events are still to come
        held: str | None = None  # why it waits without starting (its user's daily budget is spent)
        while True:
            events, last = self.events.read(mission_id, after=cursor, limit=200)
            cursor = last or cursor
            started = set()
            for event in events:
                if event.type is EventType.MISSION_QUEUED and event.payload.get("reason") == HELD_FOR_BUDGET:
                    held = str(event.payload["detail"])  # (held behind its conversation's last one: followed)
                if event.type is EventType.AGENT_STARTED and event.stage:
                    started.add(event.stage)
                    if event.stage in ahead:  # told as it began
                        del ahead[: ahead.index(event.stage) + 1]
                    else:  # it began and ended between two looks at the record
                        yield Progress(f"▸ {event.stage}")
                line = progress_of(event)
                if line:
                    yield Progress(line)
            record = self.missions.get(mission_id)
            if record.status in TERMINAL:
                return self._ended(record)
            if self._progress is not None:
                record = self._progress.current(record)
            if held is not None and record.status == MissionStatus.QUEUED:  # it will not start while you wait
                content = f"Not started yet (mission {mission_id}): {held}."
                return Reply(content, mission_id, record.status, usage_of(record.counters))
            begun = self._begun(record)
            if begun is not None and begun != announced:
                announced = begun
                if begun[1] not in started:  # else the record is a moment behind the events just told
                    ahead.append(begun[1])
                    yield Progress(f"▸ {begun[1]}")
            waiting = waiting_questions(self.interrupts, record)
            if waiting and waiting[0].interrupt_id != skip:
                asking = waiting[0]
                content = question_text(asking.kind, asking.question, asking.options, asking.data)
                if len(waiting) > 1:  # its parallel branches asked: one at a time here, in the order asked
                    content += f"\n\n(1 of {len(waiting)} questions waiting; the next follows your answer.)"
                return Reply(content, mission_id, "asking", usage_of(record.counters))
            if self._monotonic() >= deadline:
                return self._still_running(record)
            if not events:
                yield Tick
                self._sleep(self.poll_seconds)

    def _begun(self, record: MissionRecord) -> tuple[int, str] | None:
        """The stage that began last, by how many stages ran before it."""
        stage = running_stage(record, self._first_stage(record.capability))
        return (int((record.counters or {}).get("agent_hops") or 0), stage) if stage else None

    def _ended(self, record: MissionRecord) -> Reply:
        usage = usage_of(record.counters)
        if record.status == MissionStatus.CANCELLED:
            return Reply("The mission was cancelled.", record.mission_id, record.status, usage)
        result = record.result or {}
        answer = result.get("answer") if isinstance(result.get("answer"), str) else None
        if record.status != MissionStatus.COMPLETED or not answer:
            reason = record.terminal_reason or record.status
            if record.status == MissionStatus.COMPLETED:
                return Reply(f"Done ({reason}), with no answer to show.", record.mission_id, record.status, usage)
            return Reply(f"The mission ended without an answer: {reason}.", record.mission_id, record.status, usage)
        cited = [str(c) for c in result.get("citations") or []]
        sources = f"\n\nSources: {', '.join(cited[:12])}" if cited else ""
        return Reply(answer.strip() + sources, record.mission_id, record.status, usage)

    def _still_running(self, record: MissionRecord) -> Reply:
        where = f", at {record.stage}" if record.stage else ""
        content = (
            f"Still working on it (mission {record.mission_id}, {record.status}{where}). Follow it live at "
            f"/missions/{record.mission_id}/events/stream, or send another message here for the result."
        )
        return Reply(content, record.mission_id, record.status, usage_of(record.counters))

    def _conclude(self, turn: ChatTurn, reply: Reply) -> Reply:
        """Remember the reply (its digest names the conversation) and whether a mission is still owed."""
        open_mission = reply.mission_id if reply.status not in TERMINAL else None

        def change(memory: WorkingMemory) -> WorkingMemory:
            replies = [*memory.replies, reply_digest(reply.content)][-MAX_REPLIES:]
            return memory.model_copy(update={"replies": replies, "awaiting": open_mission})

        self._update(turn.user_id, turn.conversation_id, change)
        return reply
