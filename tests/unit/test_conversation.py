"""Working memory of a conversation: bounded whatever its length, and what a follow-up needs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from missions.core.conversation import KEEP_TURNS, MAX_BYTES, MAX_FOCUS, Turn, WorkingMemory, focus_of, fold


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
