"""The one parser of a person's answers (missions.core.approvals): approve, reject, or an option."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from missions.core.approvals import APPROVE, REJECT, choice, verdict

# What each reader accepted as approval before they shared this parser: none may accept less now.
CHAT_YES = {"approve", "approved", "yes", "y", "ok", "okay", "sure", "confirm", "confirmed", "go", "lgtm"}
CHAT_YES |= {"accept", "accepted", "proceed", "do"}
CLI_YES = {"y", "yes", "true", "approve", "ok"}
FITNESS_YES = {"accept", "accepted", "yes", "y", "ok", "approve", "looks good"}
TRAVEL_YES = {"approve", "approved", "yes", "y", "ok", "accept", "looks good"}
CHAT_NO = {"reject", "rejected", "no", "n", "deny", "denied", "decline", "declined", "refuse", "cancel", "stop"}
CHAT_NO |= {"don't", "dont", "nope"}


@pytest.mark.parametrize("word", sorted(CHAT_YES | CLI_YES | FITNESS_YES | TRAVEL_YES))
def test_every_word_any_reader_took_as_approval_approves(word: str):
    """Given a word the chat, the CLI, fitness_coach or travel approved with before the parser was shared,
    When it is read in any case,
    Then it approves."""
    assert verdict(word) is True and verdict(word.upper()) is True and verdict(f"  {word.title()}  ") is True


@pytest.mark.parametrize("word", sorted(CHAT_NO))
def test_every_refusal_the_chat_read_still_rejects(word: str):
    """Given a word the chat read as a refusal,
    When it is read,
    Then it rejects."""
    assert verdict(word) is False


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Yes, go ahead", True),
        ("please do", True),
        ("LGTM!", True),
        ("looks good to me", True),
        ("no: too risky", False),
        ("do not do that", False),
        ("please don't", False),
        ("", None),
        ("please", None),
        ("maybe later", None),
        ("cheaper hotel", None),
        ("it looks good", None),
    ],
)
def test_a_verdict_is_read_from_the_first_words(text: str, expected: bool | None):
    """Given an answer,
    When its verdict is read,
    Then its first words decide: a yes word approves, a no word (or "do not") rejects, anything else is neither."""
    assert verdict(text) is expected


def test_no_word_both_approves_and_rejects():
    """Given the two vocabularies,
    When they are compared,
    Then they share no word (a word cannot mean yes and no)."""
    assert not APPROVE & REJECT


SAFE_YES = sorted(APPROVE - {"do"})  # "do" approves unless "not" follows it
LOADED = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])  # a shared, busy machine


@LOADED
@given(st.sampled_from(SAFE_YES), st.sampled_from(sorted(REJECT)), st.text())
def test_the_first_word_decides_whatever_follows(yes: str, no: str, rest: str):
    """Given any text at all,
    When it follows a yes word or a no word,
    Then the verdict is that word's: a reason after it never turns a yes into a no or a no into a yes."""
    assert verdict(f"{yes} {rest}") is True
    assert verdict(f"{no} {rest}") is False


@LOADED
@given(st.text(), st.lists(st.text(max_size=20), max_size=6))
def test_a_choice_is_always_one_of_the_options_or_none(text: str, options: list[str]):
    """Given any text and any options,
    When the choice is read,
    Then it is one of the options, or None: never a value of its own."""
    picked = choice(text, options)
    assert picked is None or picked in options


@LOADED
@given(st.lists(st.text(min_size=1, max_size=20).filter(str.strip), min_size=1, max_size=9, unique=True), st.data())
def test_a_choice_is_read_from_its_number(options: list[str], data: st.DataObject):
    """Given options,
    When the answer names one by its number, as the CLI and the chat let people type it,
    Then that option is picked."""
    n = data.draw(st.integers(min_value=1, max_value=len(options)))
    template = data.draw(st.sampled_from(["{n}", "option {n}", "#{n}", "number {n} please"]))
    assert choice(template.format(n=n), options) == options[n - 1]


def test_a_choice_is_read_from_an_ordinal_or_a_name_and_an_unclear_one_is_none():
    """Given options,
    When the answer is an ordinal, an option's name in any case, or text naming none of them,
    Then the ordinal's or the named option is picked, and the unclear text picks none."""
    options = ["basic", "family plan", "pro"]
    assert choice("the second one", options) == "family plan"
    assert choice("last", options) == "pro"
    assert choice("the Family Plan", options) == "family plan"
    assert choice("whichever is cheapest", options) is None
