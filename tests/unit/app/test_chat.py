"""The chat entry with fakes: OpenAI's wire format checked, messages read as answers, a message as a turn
of a conversation (missions.app.chat_wire, missions.core.chat, missions.service.chat)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from missions.adapters.memory.checkpoints import MemoryCheckpointStore
from missions.adapters.memory.conversations import InMemoryConversationStore
from missions.adapters.memory.events import MemoryEventStore
from missions.adapters.memory.interrupts import MemoryInterruptStore
from missions.adapters.memory.missions import MemoryMissionStore
from missions.app.chat_wire import MAX_GOAL_CHARS, MAX_REQUEST_BYTES, ChatError, ChatRequest, parse_request
from missions.app.resolver import STREAM_ERROR_STATUS, openai_error_of, status_of
from missions.core.chat import UnknownConversation, UnknownModel, interpret_answer, question_text, reply_digest
from missions.core.memory.conversation import Turn, fold
from missions.core.mission.envelope import InterruptKind, InterruptResponse
from missions.core.mission.events import Event, EventType
from missions.core.mission.requests import MissionRequest
from missions.core.mission.status import TERMINAL, MissionStatus
from missions.ports.checkpoints import Checkpoint
from missions.ports.interrupts import InterruptRecord
from missions.ports.missions import MissionRecord
from missions.service.chat import ChatService, Progress, Reply
from missions.service.lifecycle import Lifecycle
from missions.service.progress import MissionProgress

# -- the wire format -----------------------------------------------------------------------------


def body(**fields: Any) -> bytes:
    return json.dumps({"model": "code_analysis", "messages": [{"role": "user", "content": "hi"}], **fields}).encode()


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"{not json", 400),
        (b"[]", 400),
        (body(messages=[]), 400),
        (body(messages=[{"role": "assistant", "content": "hi"}]), 400),
        (body(messages=[{"role": "user", "content": "  "}]), 400),
        (body(messages=[{"role": "robot", "content": "hi"}]), 400),
        (body(model=""), 400),
        (body(conversation_id="has spaces"), 400),
        (body(messages=[{"role": "user", "content": "x" * (MAX_GOAL_CHARS + 1)}]), 413),
        (b" " * (MAX_REQUEST_BYTES + 1), 413),
    ],
)
def test_a_malformed_request_is_refused_with_openais_error_shape(raw: bytes, status: int):
    with pytest.raises(ChatError) as refused:
        parse_request(raw)
    assert refused.value.status == status
    error = refused.value.body()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]


def test_openais_other_parameters_are_accepted_and_text_parts_read():
    request = parse_request(
        body(
            temperature=0.2,
            max_tokens=10,
            tools=[],
            messages=[
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "Where is"}, {"type": "text", "text": "it?"}]},
            ],
        )
    )
    assert request.goal == "Where is\nit?" and request.history() == [{"role": "system", "content": "be brief"}]


def test_the_history_the_mission_gets_is_bounded():
    turns = [{"role": "user" if i % 2 else "assistant", "content": "y" * 5000} for i in range(1, 100)]
    request = ChatRequest.model_validate({"model": "m", "messages": turns})
    history = request.history()
    assert len(history) == 12 and all(len(m["content"]) == 1500 for m in history)


@given(st.lists(st.text(min_size=1, max_size=20).filter(str.strip), min_size=1, max_size=9, unique=True), st.data())
def test_a_choice_is_read_from_its_number(options: list[str], data: st.DataObject):
    n = data.draw(st.integers(min_value=1, max_value=len(options)))
    template = data.draw(st.sampled_from(["{n}", "option {n}", "#{n}", "number {n} please"]))
    answer = interpret_answer(InterruptKind.CHOICE, options, template.format(n=n))
    assert isinstance(answer, InterruptResponse) and answer.decision == options[n - 1]
    answer.check_shape(InterruptKind.CHOICE, options)


def test_a_choice_is_read_from_its_name_and_an_unclear_one_is_asked_again():
    options = ["basic", "family plan", "pro"]
    picked = interpret_answer(InterruptKind.CHOICE, options, "the Family Plan")
    assert isinstance(picked, InterruptResponse) and picked.decision == "family plan"
    again = interpret_answer(InterruptKind.CHOICE, options, "whichever is cheapest")
    assert isinstance(again, str) and "1. basic" in again


@pytest.mark.parametrize(
    ("text", "approved"),
    [
        ("approve", True),
        ("Yes, go ahead", True),
        ("ok", True),
        ("please do", True),
        ("LGTM", True),
        ("reject", False),
        ("no: too risky", False),
        ("don't", False),
        ("do not do that", False),
    ],
)
def test_an_approval_is_read_from_yes_and_no_words(text: str, approved: bool):
    for kind in (InterruptKind.CONFIRMATION, InterruptKind.AGENT_REVIEW):
        answer = interpret_answer(kind, [], text)
        assert isinstance(answer, InterruptResponse) and answer.approved is approved and answer.text == text
        answer.check_shape(kind)


@given(st.text(min_size=1).filter(str.strip))
def test_a_clarification_takes_any_text_and_an_approval_never_guesses(text: str):
    answer = interpret_answer(InterruptKind.CLARIFICATION, [], text)
    assert isinstance(answer, InterruptResponse) and answer.text == text.strip()
    verdict = interpret_answer(InterruptKind.CONFIRMATION, [], text)
    assert isinstance(verdict, str) or verdict.approved is not None  # a yes, a no, or asked again


def test_a_question_shows_what_will_change_and_how_to_answer():
    text = question_text(InterruptKind.CONFIRMATION, "Deploy it?", [], {"diff": "+ new\n- old"})
    assert "```diff\n+ new\n- old\n```" in text and "approve" in text
    choice = question_text(InterruptKind.CHOICE, "Which?", ["a", "b"], {})
    assert "1. a\n2. b" in choice


def test_a_reply_is_known_again_however_its_whitespace_was_changed():
    assert reply_digest("An answer\n\nwith  lines ") == reply_digest("An answer with lines")


# -- the service ---------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Started:
    mission_id: str


class World:
    """The chat over in-memory stores; `finish` and `ask` play what the stages would do."""

    def __init__(self) -> None:
        self.missions, self.events = MemoryMissionStore(), MemoryEventStore()
        self.checkpoints = MemoryCheckpointStore()
        self.interrupts, self.conversations = MemoryInterruptStore(), InMemoryConversationStore()
        self.started: list[MissionRequest] = []
        self.answers: list[tuple[str, str, InterruptResponse]] = []
        self.clock = Clock()
        self.chat = ChatService(
            missions=self.missions,
            events=self.events,
            interrupts=self.interrupts,
            conversations=self.conversations,
            submit=self.submit,
            answer=self.answer,
            choose_capability=self.choose,
            capabilities=lambda: ["code_analysis", "travel"],
            first_stage=lambda capability: "plan",
            monotonic=self.clock.monotonic,
            sleep=self.clock.sleep,
            progress=MissionProgress(self.checkpoints),
        )
        self.on_poll: list[Any] = []

    def choose(self, goal: str, requested: str | None, fallback: str | None) -> str:
        return requested or ("travel" if "trip" in goal else fallback or "code_analysis")

    def submit(self, request: MissionRequest) -> Started:
        mission_id = f"m{len(self.started) + 1}"
        self.started.append(request)
        record = MissionRecord(
            mission_id=mission_id,
            user_id=request.user_id,
            capability=request.capability,
            goal=request.goal,
        )
        self.missions.create(record)
        Lifecycle(self.missions).start(mission_id)
        self.events.append(mission_id, "s1", [Event(type=EventType.AGENT_STARTED, mission_id=mission_id, stage="plan")])
        return Started(mission_id)

    def answer(self, mission_id: str, interrupt_id: str, response: InterruptResponse) -> None:
        self.answers.append((mission_id, interrupt_id, response))
        Lifecycle(self.missions).resumed(mission_id)

    def finish(self, mission_id: str, answer: str) -> None:
        if self.missions.get(mission_id).status in TERMINAL:
            return
        result = {"answer": answer, "citations": ["a.py:3"]}
        request = self.started[int(mission_id[1:]) - 1]
        if request.conversation_id:  # the final stage folds its turn in, as the runner does
            memory, version = self.conversations.get("ann", request.conversation_id) or (None, 0)
            assert memory is not None
            turn = Turn(mission_id=mission_id, capability=request.capability, goal=request.goal, answer=answer)
            self.conversations.put(fold(memory, turn), version)
        Lifecycle(self.missions).end(mission_id, MissionStatus.COMPLETED, result=result, terminal_reason="completed")

    def ask(self, mission_id: str, kind: InterruptKind = InterruptKind.CONFIRMATION) -> None:
        self.interrupts.put(
            InterruptRecord(
                mission_id=mission_id, interrupt_id="q1", kind=kind, stage="plan", question="Go on?", task_token="t"
            )
        )
        Lifecycle(self.missions).waiting(mission_id, "q1")

    def say(self, *messages: str, model: str = "missions", wait: float = 5.0, **fields: Any) -> tuple[Any, Reply]:
        roles = ["user", "assistant"] * len(messages)
        request = ChatRequest.model_validate(
            {
                "model": model,
                "messages": [{"role": r, "content": m} for r, m in zip(roles, messages, strict=False)],
                **fields,
            }
        )
        turn = self.chat.begin("ann", request, named=fields.get("conversation_id"))
        steps = []
        for step in self.chat.follow(turn, wait):
            steps.append(step)
            for action in self.on_poll:
                action()
        reply = steps[-1]
        assert isinstance(reply, Reply)
        return turn, reply


def test_a_message_starts_a_mission_of_a_new_conversation_and_the_reply_names_it_again():
    world = World()
    world.on_poll = [lambda: world.finish("m1", "compute_tax is in a.py") if world.clock.now > 1 else None]
    # Given a first message
    turn, reply = world.say("Where is compute_tax?", context={"repo": "/src"})
    # Then a mission of the chosen capability started as a turn of a new conversation, with the repository
    started = world.started[0]
    assert started.capability == "code_analysis" and started.conversation_id == turn.conversation_id
    assert started.context["repo"] == "/src" and started.trigger == "chat"
    assert reply.content == "compute_tax is in a.py\n\nSources: a.py:3" and reply.status == "completed"
    # When the client sends the history back with a follow-up, naming nothing
    world.on_poll = [lambda: world.finish("m2", "checkout calls it") if world.clock.now > 2 else None]
    again, _ = world.say("Where is compute_tax?", reply.content, "Who calls it?")
    # Then it is the same conversation, and the repository is still what the mission starts with
    assert again.conversation_id == turn.conversation_id
    assert (
        world.started[1].context["repo"] == "/src" and world.started[1].context["chat"]["history"][0]["role"] == "user"
    )


def test_progress_comes_before_the_reply():
    world = World()
    world.on_poll = [lambda: world.finish("m1", "done")]
    request = ChatRequest.model_validate({"model": "travel", "messages": [{"role": "user", "content": "plan a trip"}]})
    steps = list(world.chat.follow(world.chat.begin("ann", request), 5))
    assert steps[0] == Progress("▸ plan") and isinstance(steps[-1], Reply)


def openai_code(exc: Exception) -> tuple[int, str | None]:
    """The status and OpenAI `code` the chat answers a refused message with (missions.app.resolver)."""
    status, body = openai_error_of(exc, status_of(exc, STREAM_ERROR_STATUS))
    return status, body["error"]["code"]


def test_an_unknown_model_or_another_users_conversation_is_404_and_starts_nothing():
    world = World()
    with pytest.raises(UnknownModel) as unknown:
        world.say("hi", model="gpt-4o")
    assert openai_code(unknown.value) == (404, "model_not_found")
    with pytest.raises(UnknownConversation) as missing:
        world.say("hi", "hello", "and?", conversation_id="someone-elses")
    assert openai_code(missing.value) == (404, "conversation_not_found")
    assert world.started == [] and world.conversations.list("ann") == []


def test_a_question_is_the_reply_and_the_next_message_answers_it_once():
    world = World()
    world.on_poll = [lambda: world.ask("m1") if world.clock.now > 0.5 and not world.answers else None]
    turn, asked = world.say("deploy it")
    assert asked.status == "asking" and "Go on?" in asked.content
    # a message that does not answer is asked again: nothing is answered
    world.on_poll = []
    _, unclear = world.say("deploy it", asked.content, "what would you do?")
    assert world.answers == [] and "approve" in unclear.content
    # When the user approves
    world.on_poll = [lambda: world.finish("m1", "deployed") if world.answers else None]
    _, done = world.say("deploy it", asked.content, "approve")
    # Then that question is answered once, with approval, and the reply is the result; no new mission
    assert [(m, q, r.approved) for m, q, r in world.answers] == [("m1", "q1", True)]
    assert done.content.startswith("deployed") and len(world.started) == 1


def test_a_mission_that_outlives_the_wait_is_handed_over_by_the_next_message_before_its_own():
    world = World()
    _, running = world.say("plan a trip", wait=2)
    assert running.status == "running" and "Still working on it (mission m1" in running.content
    world.finish("m1", "Lisbon, 3 days")
    world.on_poll = [lambda: world.finish("m2", "museums: two") if len(world.started) == 2 else None]
    _, later = world.say("plan a trip", running.content, "which museums?")
    assert "**Your earlier request** (plan a trip)" in later.content and "Lisbon, 3 days" in later.content
    assert later.content.endswith("museums: two\n\nSources: a.py:3") and world.started[1].capability == "travel"


def test_a_new_message_is_kept_behind_the_open_one_and_the_chat_follows_the_new_one_next():
    # Given a mission that outlived its reply's wait
    world = World()
    _, running = world.say("plan a trip", wait=1)
    # When a second message arrives while it runs (the launcher holds its mission behind the first: enqueue)
    _, still = world.say("plan a trip", running.content, "and hotels?", wait=1)
    # Then the reply is the first one's progress and says the new one waits for it; nothing is lost
    assert "Still working on it (mission m1" in still.content and "mission m2 starts when it ends" in still.content
    assert [r.goal for r in world.started] == ["plan a trip", "and hotels?"]
    assert world.started[1].conversation_id == world.started[0].conversation_id
    # and the next message follows the new one (the chat owes its reply now)
    memory, _ = world.conversations.get("ann", world.started[0].conversation_id or "")  # type: ignore[misc]
    assert memory.awaiting == "m2"


def test_a_stage_is_told_as_it_begins_from_its_checkpoints_progress_once():
    # Given a mission whose first stage ran and whose routing sent it on to `search`
    world = World()
    calls = {"n": 0}

    def route_on() -> None:
        calls["n"] += 1
        if calls["n"] == 1:  # the first stage commits: its events, and where it goes next, in its checkpoint
            progress = {"stage": "plan", "next_stage": "search", "counters": {"agent_hops": 1}}
            world.checkpoints.put(
                Checkpoint(
                    thread_id="m1",
                    checkpoint_id="0001-plan",
                    parent_id=None,
                    stage="plan",
                    envelope={},
                    progress=progress,
                )
            )
        elif calls["n"] == 4:
            world.finish("m1", "found")

    request = ChatRequest.model_validate({"model": "travel", "messages": [{"role": "user", "content": "a trip"}]})
    steps = []
    for step in world.chat.follow(world.chat.begin("ann", request), 5):
        steps += [step] if isinstance(step, Progress) else []
        route_on()
    # Then each stage is told once, as it begins, before its own events are written
    assert steps == [Progress("▸ plan"), Progress("▸ search")]
