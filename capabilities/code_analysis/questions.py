"""What a question about code asks: its kind, the symbols it is about, and the words worth searching.

Why in code: the kind decides which tools can answer (callers come from call sites, not from the word
"call") and what evidence counts as an answer, for the offline model and a real one alike; the
planner's model is told the kind, and the critic checks the evidence against it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

QuestionKind = Literal["definition", "callers", "explain", "path", "setting", "event", "history", "search"]
KINDS: tuple[QuestionKind, ...] = (
    "definition",
    "callers",
    "explain",
    "path",
    "setting",
    "event",
    "history",
    "search",
)

# question words, grammar and the vocabulary of asking: never search terms
STOPWORDS = frozenset(
    """
a about after all also an and any are as at be been being by can code could do does doing done each
explain find for from get gets got has have how i if in into is it its me my of on or our repo repository
should show so tell that the their them then there these this those to use used uses using was what
when where which who whom whose why will with work works would you your project file files function functions
class classes method methods defined define defines definition declared declare implemented implement
implementation happen happens handle handled handles help please something anything stuff thing things
look need want know question call calls called calling caller callers invoke invokes invoked invoking
reach reaches reached reaching path paths usage usages used reference references referenced mention
mentions located location live lives living go goes get read reads set sets describe does did doing
variable variables setting settings environment env config configuration configured event events handler
handlers code codebase source way ways place places part parts line lines module modules package packages
""".split()
)
IDENTIFIER = re.compile(
    r"`([^`]+)`|\b([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)\b|"
    r"\b([A-Z][A-Z0-9]*_[A-Z0-9_]+|[a-z]+_[a-z0-9_]+|_[A-Za-z0-9_]+|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+"
    r"|[a-z]+[A-Z][A-Za-z0-9]*|[A-Z]{2,}[a-z][A-Za-z0-9]*)\b"
)
PLAIN_SUBJECT = re.compile(
    r"^(?:where (?:is|are)|who calls|what calls|which (?:functions?|methods?|code) calls?|callers of|what does|"
    r"how does|what is|explain|describe|find|usages? of|references to|where do we use|where does)\s+"
    r"(?:the\s+)?(?:function|method|class|type|interface|struct\s+)?\s*`?([A-Za-z_][A-Za-z0-9_.]*[A-Za-z0-9_])`?",
    re.IGNORECASE,
)

_PATH = re.compile(
    r"\bhow (?:does|do|can|is|would) (?P<a>\S+) (?:reach|get to|end up (?:in|at|calling)|lead to|call|invoke|"
    r"trigger|use|run)s? (?P<b>\S+)|\bpath from (?P<c>\S+) to (?P<d>\S+)|\bfrom (?P<e>\S+) to (?P<f>\S+)",
    re.IGNORECASE,
)
_CALLERS = re.compile(
    r"\b(?:who|what|which \w+(?: \w+)?) (?:calls?|invokes?|uses?|references?)\b|\bcall(?:er)?s? (?:of|to)\b|"
    r"\bwhere (?:is|are|do we|does \w+) .*\b(?:called|used|invoked|referenced|call|use)\b|\busages? of\b|"
    r"\breferences? to\b|\bcall sites?\b",
    re.IGNORECASE,
)
_SETTING = re.compile(
    r"\b(?:settings?|config(?:uration)?|environment variables?|env(?:ironment)? vars?|option|flag)\b|"
    r"\b(?:os\.environ|getenv|process\.env)\b|\bwhere (?:is|are) \S+ (?:read|set|configured|loaded)\b",
    re.IGNORECASE,
)
_EVENT = re.compile(
    r"\bwhat handles\b|\bhandlers? (?:for|of)\b|\bwhich handler\b|\bhandles? (?:the )?\S+ (?:event|message|signal)s?\b|"
    r"\bwhen \S+ (?:is )?(?:fired|emitted|published|dispatched|received)\b",
    re.IGNORECASE,
)
_DEFINITION = re.compile(
    r"\b(?:defined|declared|implemented|lives?|located)\b|"
    r"^(?:where(?:'s| is| are) (?:the )?\S+|find (?:the )?\S+)\s*\??$|^which file (?:has|holds|defines)\b",
    re.IGNORECASE,
)
# when and why code changed: answered from the repository's history (capabilities.code_analysis.history)
_HISTORY = re.compile(
    r"\b(?:when|why)\s+(?:did|was|were|has|have|had|is)\b[^?]*\b(?:chang\w*|add(?:ed)?|introduc\w*|modif\w*|remov\w*|"
    r"rewr\w*|wr(?:ite|ote|itten))\b|"
    r"\bwho\s+(?:changed|added|introduced|modified|removed|wrote|rewrote|last touched)\b|"
    r"\bhistory of\b|\bwhich commits?\b|\bgit (?:log|history|blame)\b|\bblame\b",
    re.IGNORECASE,
)
HISTORY_WORDS = frozenset(
    "chang added introduc modifi modified remov removed rewrote rewritten wrote written".split()
    + "history commit blame last".split()
)
_EXPLAIN = re.compile(r"\b(?:what does|what is|how does|how do|explain|describe|what happens)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Question:
    kind: QuestionKind
    subjects: list[str] = field(default_factory=list)  # identifiers, in the order asked (a path: from, to)
    terms: list[str] = field(default_factory=list)  # other words worth searching, stemmed


def identifiers(text: str) -> list[str]:
    found = [next(g for g in m.groups() if g) for m in IDENTIFIER.finditer(text)]
    return list(dict.fromkeys(f.strip("()") for f in found if f and f.lower() not in STOPWORDS))


def keywords(text: str) -> list[str]:
    idents = {part.lower().lstrip("_") for i in identifiers(text) for part in (i, *i.split("."))}
    words = re.findall(r"[A-Za-z][A-Za-z0-9_-]{2,}", text)
    return list(dict.fromkeys(w.lower() for w in words if w.lower() not in STOPWORDS and w.lower() not in idents))


def stem(word: str) -> str:
    """A crude English stem, matched as a prefix: 'enforced' finds enforce, enforcement, enforcing."""
    for suffix in ("ations", "ation", "ement", "ments", "ing", "ies", "ied", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)] + ("y" if suffix in ("ies", "ied") else "")
    return word


def _plain_subject(text: str) -> str | None:
    """`Where is compute defined?`: a lower-case single word named where a symbol goes."""
    match = PLAIN_SUBJECT.search(text.strip())
    if not match:
        return None
    named = match.group(1)
    # `File` mid-sentence names a symbol even when `file` is a word of asking; `file` does not
    return named if named.lower() not in STOPWORDS or named[0].isupper() else None


def classify(goal: str) -> Question:
    """The kind of question a goal asks, with its subjects and search terms."""
    text = goal.strip()
    subjects = identifiers(text)
    plain = _plain_subject(text)
    if plain and plain not in subjects and not any(s.startswith(f"{plain}.") for s in subjects):
        subjects = [plain, *subjects]
    named = {part.lower().lstrip("_") for s in subjects for part in (s, *s.split("."))}
    terms = [stem(w) for w in keywords(text) if w not in named]
    path = _PATH.search(text)
    if path:
        a, b = [g for g in path.groups() if g][:2]
        ends = [s.strip("`?.,()") for s in (a, b)]
        if all(re.fullmatch(r"[A-Za-z_][\w.]*", e) and e.lower() not in STOPWORDS for e in ends):
            return Question("path", ends, terms)
    kind: QuestionKind
    if _HISTORY.search(text):
        return Question("history", subjects, list(dict.fromkeys(t for t in terms if t not in HISTORY_WORDS)))
    if _CALLERS.search(text) and subjects:
        kind = "callers"
    elif _EVENT.search(text):
        kind = "event"
    elif _SETTING.search(text):
        kind = "setting"
    elif _EXPLAIN.search(text) and subjects and not re.search(r"\b(?:defined|declared)\b", text, re.IGNORECASE):
        kind = "explain"
    elif _DEFINITION.search(text) and subjects:
        kind = "definition"
    else:
        kind = "search"
    return Question(kind, subjects, list(dict.fromkeys(terms)))


__all__ = ["KINDS", "STOPWORDS", "Question", "QuestionKind", "classify", "identifiers", "keywords", "stem"]
