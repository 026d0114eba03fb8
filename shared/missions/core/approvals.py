"""One reading of a person's answer to a mission's question: approve, reject, or one of the options.

The chat, the CLI and the capabilities that ask for a review read answers here, so "looks good" or
"option 2" means the same wherever it is typed. The words accepted are the union of what each of them
accepted before, so no caller accepts less than it did.

A verdict is read from the first words only: "yes, but a cheaper hotel" approves (the caller passes the
whole text on), "do not" and "please don't" reject, and text that starts with neither is no verdict.
A choice is a number or an ordinal within the options, an option's name, or the one option the text
names; anything else is no choice (the caller decides whether free text stands).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["APPROVE", "REJECT", "choice", "verdict"]

APPROVE = frozenset(
    {
        "approve",
        "approved",
        "yes",
        "y",
        "ok",
        "okay",
        "sure",
        "confirm",
        "confirmed",
        "go",
        "lgtm",
        "accept",
        "accepted",
        "proceed",
        "do",
        "true",
    }
)
REJECT = frozenset(
    {
        "reject",
        "rejected",
        "no",
        "n",
        "deny",
        "denied",
        "decline",
        "declined",
        "refuse",
        "cancel",
        "stop",
        "don't",
        "dont",
        "nope",
    }
)
_APPROVE_PHRASES = (("looks", "good"),)
_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "last": -1}


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def verdict(text: str) -> bool | None:
    """True: the text approves; False: it rejects; None: it says neither."""
    words = _words(text)
    if not words:
        return None
    second = words[1] if len(words) > 1 else ""
    if words[0] in REJECT or (words[0] in ("do", "please") and second in ("not", "n't")):
        return False
    if words[0] == "please" and second in REJECT:
        return False
    if words[0] in APPROVE or (words[0] == "please" and second in APPROVE):
        return True
    if any(tuple(words[: len(phrase)]) == phrase for phrase in _APPROVE_PHRASES):
        return True
    return None


def choice(text: str, options: Sequence[str]) -> str | None:
    """The option the text picks (by number, ordinal, name, or the one option it names), else None."""
    words = _words(text)
    numbers = [int(w) for w in words if w.isdigit()]
    if len(numbers) == 1 and 1 <= numbers[0] <= len(options):
        return options[numbers[0] - 1]
    ordinals = [_ORDINALS[w] for w in words if w in _ORDINALS]
    if len(ordinals) == 1 and len(options) >= abs(ordinals[0]):
        return options[ordinals[0] - 1 if ordinals[0] > 0 else -1]
    said = " ".join(text.lower().split())
    exact = [o for o in options if " ".join(o.lower().split()) == said]
    if exact:
        return exact[0]
    named = [o for o in options if " ".join(o.lower().split()) in said or said in " ".join(o.lower().split())]
    return named[0] if len(named) == 1 else None
