"""What a stage receives of its user's notes (missions.core.mission.notes)."""

from __future__ import annotations

from missions.core.mission.notes import MAX_NOTES, Note, deliver, texts


def test_a_stage_receives_each_note_once_and_a_conversation_turn_keeps_them():
    # Given a mission that is a turn of a conversation, and two notes its record returned
    context = {"conversation": {"id": "c1", "turns": []}}
    first, second = Note(text="skip the museums"), Note(text="  the budget is 500 ")
    pending = [first.model_dump(), second.model_dump()]
    # When the next stage starts with them
    received = deliver(context, pending)
    # Then it received both, in its context and in the conversation's working memory
    assert [n.text for n in received] == ["skip the museums", "the budget is 500"]
    assert texts(context) == ["skip the museums", "the budget is 500"]
    assert context["conversation"]["notes"] == ["skip the museums", "the budget is 500"]
    # and the stage after it, handed the same notes again (the record keeps them), receives nothing new
    assert deliver(context, pending) == []
    assert len(context["notes"]) == 2


def test_what_is_not_a_note_is_ignored_and_a_context_keeps_at_most_the_limit():
    context: dict = {}
    assert deliver(context, [{"text": ""}, {"nope": 1}, "x"]) == []  # type: ignore[list-item]
    assert context == {}
    notes = [Note(text=f"n{i}").model_dump() for i in range(MAX_NOTES + 5)]
    deliver(context, notes)
    assert len(context["notes"]) == MAX_NOTES and texts(context)[-1] == f"n{MAX_NOTES + 4}"
