"""Working memory of a conversation: bounded whatever its length, and what a follow-up needs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from missions.adapters.memory.conversations import InMemoryConversationStore
from missions.core.memory.conversation import (
    CONTEXT_KEY,
    KEEP_TURNS,
    MAX_BYTES,
    MAX_FOCUS,
    Turn,
    WorkingMemory,
    focus_of,
    fold,
)
from missions.core.mission.envelope import Envelope
from missions.service.conversations import ConversationService


def test_a_turn_brings_what_it_was_about_into_focus():
    memory = fold(
        WorkingMemory(conversation_id="c1", user_id="u"),
        Turn(
            mission_id="m1", capability="code_analysis", goal="Where is compute_tax defined?", answer="billing/tax.py:4"
        ),
        citations=["billing/tax.py:4"],
    )
    assert memory.focus[0] == "compute_tax" and "billing/tax.py" in memory.focus
    assert memory.evidence == ["billing/tax.py:4"] and memory.as_context()["turns"][0]["goal"].startswith("Where")
    assert focus_of("Analyze `sensor.home_energy` and EnvelopeCodec") == ["sensor.home_energy", "EnvelopeCodec"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.text(min_size=1, max_size=3000), st.text(max_size=5000)), min_size=1, max_size=60))
def test_the_memory_stays_bounded_however_long_the_conversation(turns):
    # For any conversation, the working memory never grows past its caps, and keeps the newest turn whole
    memory = WorkingMemory(conversation_id="c", user_id="u")
    for n, (goal, answer) in enumerate(turns):
        memory = fold(
            memory, Turn(mission_id=f"m{n}", capability="x", goal=goal, answer=answer), citations=[f"f.py:{n + 1}"]
        )
        assert memory.size() <= MAX_BYTES
        assert len(memory.turns) <= KEEP_TURNS and len(memory.focus) <= MAX_FOCUS
        assert memory.turns[-1].mission_id == f"m{n}"


# -- the conversations service: an ended mission folded into its conversation -------------------------


def _ended_turn(mission_id: str = "m_1", conversation: str | None = "c1") -> Envelope:
    context = {CONTEXT_KEY: {"id": conversation}} if conversation else {}
    return Envelope(
        mission_id=mission_id, capability="code_analysis", raw_input="Where is compute_tax?", context=context
    )


RESULT = {"answer": "billing/tax.py:4", "citations": ["billing/tax.py:4"]}


class ChangedOnce(InMemoryConversationStore):
    """A store where another mission of the conversation folds its turn between this one's read and write."""

    def __init__(self) -> None:
        super().__init__()
        self.raced = False

    def put(self, memory: WorkingMemory, expected_version: int) -> None:
        if not self.raced:
            self.raced = True
            other = Turn(mission_id="m_other", capability="code_analysis", goal="g")
            super().put(fold(WorkingMemory(conversation_id="c1", user_id="local"), other, citations=[]), 0)
        super().put(memory, expected_version)


def test_an_ended_mission_is_folded_into_its_conversation_once_whoever_retries():
    # Given a mission that is a turn of conversation c1, ended with an answer and a focus
    store = InMemoryConversationStore()
    service = ConversationService(store)
    envelope = _ended_turn()
    # When its final stage folds it, and a retry of that stage folds it again
    for _ in range(2):
        service.fold_mission(envelope, "completed", RESULT, {"focus": ["compute_tax"]})
    # Then the conversation holds its turn once, with its answer, citations and focus
    found = store.get(envelope.user_id, "c1")
    assert found is not None
    memory, _ = found
    assert [(t.mission_id, t.answer, t.status) for t in memory.turns] == [("m_1", "billing/tax.py:4", "completed")]
    assert memory.evidence == ["billing/tax.py:4"] and memory.focus[0] == "compute_tax"


def test_a_mission_folded_while_another_changes_the_conversation_keeps_both_turns():
    # Given a conversation another mission changes between this one's read and its write
    store = ChangedOnce()
    envelope = _ended_turn()
    # When this mission is folded in
    ConversationService(store).fold_mission(envelope, "failed", {"answer": None}, {})
    # Then it read the conversation again: both turns are kept, in order
    found = store.get(envelope.user_id, "c1")
    assert found is not None
    assert [(t.mission_id, t.status) for t in found[0].turns] == [("m_other", "completed"), ("m_1", "failed")]


def test_a_mission_of_no_conversation_leaves_the_conversations_alone():
    store = InMemoryConversationStore()
    ConversationService(store).fold_mission(_ended_turn(conversation=None), "completed", RESULT, {})
    assert store.list("local") == []
