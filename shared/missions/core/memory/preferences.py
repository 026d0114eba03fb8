"""Preferences in a user's feedback: what the model extracts, and the rules that read them offline.

The offline rules are the scripted model's deterministic reading of feedback text (the default
without an API key, and the tests'): likes and dislikes, budgets, speed and verbosity, citations
and examples, and whether the text is a complaint.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import Field, StringConstraints, field_validator

from missions.core.llm.provider import LLMRequest
from missions.core.mission.envelope import Model

MAX_LIST_ITEMS = 50  # a list preference keeps its newest items, so a memory item stays small
_KEY = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


PreferenceValue = (
    bool
    | int
    | float
    | Annotated[str, StringConstraints(max_length=500)]
    | Annotated[list[Annotated[str, StringConstraints(max_length=200)]], Field(max_length=MAX_LIST_ITEMS)]
)


class Preference(Model):
    key: str = Field(max_length=64, pattern=_KEY.pattern)
    value: PreferenceValue
    confidence: float = Field(0.7, ge=0.0, le=1.0)

    @field_validator("key", mode="before")
    @classmethod
    def _snake_case(cls, value: Any) -> Any:
        """Models write "Weeknight budget" as often as "weeknight_budget": accept both."""
        if isinstance(value, str):
            value = re.sub(r"[^a-z0-9]+", "_", value.strip().lower()).strip("_")
        return value


class PreferenceExtraction(Model):
    """The model's structured answer for the "feedback" stage."""

    preferences: list[Preference] = Field(default_factory=list, max_length=30)
    complaint: bool = False
    complaint_summary: str | None = Field(None, max_length=1000)


def fold(text: str) -> str:
    return text.strip().casefold()


def union(existing: Iterable[str], new: Iterable[str]) -> list[str]:
    merged: dict[str, str] = {}
    for value in [*existing, *new]:
        merged.setdefault(fold(str(value)), str(value))
    return list(merged.values())[-MAX_LIST_ITEMS:]


def combine(preferences: list[Preference]) -> list[Preference]:
    """Same key twice in one answer: lists are joined (highest confidence), a scalar's last word wins."""
    combined: dict[str, Preference] = {}
    for preference in preferences:
        previous = combined.get(preference.key)
        if previous is not None and isinstance(previous.value, list) and isinstance(preference.value, list):
            preference = Preference(
                key=preference.key,
                value=union(previous.value, preference.value),
                confidence=max(previous.confidence, preference.confidence),
            )
        combined[preference.key] = preference
    return list(combined.values())


# --------------------------------------------------------------------------- the offline rules


_GENERIC_NOUNS = frozenset(
    "options option dishes dish recipes recipe choices choice meals meal ideas idea examples example suggestions "
    "suggestion alternatives alternative food foods stuff things thing kinds kind types type variety".split()
)
# words after "more"/"less"/"too" that are not things one likes or dislikes (handled by other rules or noise)
_NOT_ITEMS = frozenset(
    "expensive affordable pricey costly cheap cheaper money budget detail detailed details concise specific "
    "accurate quickly quick slowly often time times words text info information context sources source citations "
    "citation references reference depth verbose wordy long short brief much many than of like please answer answers "
    "result results response responses output report summary mission task job".split()
)
_BOUNDARY = frozenset(
    "for in on at to from with please but than because since so if when though although next this that these "
    "those it its i we you they he she me us them my our your would could should will is are was were be been am "
    "instead again too very really maybe also as like now then thanks thank overall otherwise which who what "
    "more less fewer no not don't didn't can can't cannot do does did has have had there here just only even "
    "the a an some any of".split()
)
_LEADING = frozenset("the a an some any of".split())
_DIETARY = (
    "vegetarian",
    "vegan",
    "pescatarian",
    "gluten-free",
    "dairy-free",
    "lactose-free",
    "nut-free",
    "sugar-free",
    "low-carb",
    "low-sodium",
    "keto",
    "paleo",
    "halal",
    "kosher",
)
_DIETARY_STRONG = re.compile(
    r"\b(i'm|i am|we're|we are|my|our|must|need|needs|only|strictly|always|allergic|can't eat|cannot eat|"
    r"don't eat|do not eat|has to be|have to be|follow)\b"
)
_NEGATED_BEFORE = re.compile(r"\b(not|no longer|isn't|aren't|wasn't|don't need|doesn't need|no need for)\s+(\w+\s+)?$")

_NEGATIVE = re.compile(
    r"\b(bad|wrong|useless|terrible|awful|horrible|poor|worst|broken|incorrect|unhelpful|disappointing|disappointed|"
    r"not helpful|not useful|didn't|did not|doesn't work|does not work|too expensive|too pricey|overpriced|"
    r"too slow|(took|takes|waited) (way |far |much )?too long|took forever|waste|missed|missing|failed)\b"
)
_NOT_NEGATIVE = re.compile(r"\b(not|n't|never)\s+(too |that |so |at all |half |as )?(bad|terrible|awful|poor)\b")

_BUDGET_LOWER = re.compile(
    r"\b(too (expensive|pricey|costly|much money)|pricey|overpriced|over (the |my |our )?budget|"
    r"costs? too much|cheaper|less expensive|more affordable|(lower|smaller|tighter) budget|on a budget)\b"
)
_BUDGET_HIGHER = re.compile(
    r"\b((can|could) spend more|(higher|bigger|larger) budget|(don't|do not) mind paying more|too cheap|"
    r"money is no object|splurge)\b"
)
_BUDGET_NEGATED = re.compile(r"\b(not|wasn't|isn't|never|n't)\s+(too |that |so |at all )?(expensive|pricey|costly)\b")
_WAITED = re.compile(
    r"\b((took|takes|taking|waited|wait|waiting) (way |far |much |a bit |a little )?too long|took forever|"
    r"takes forever)\b"
)
_SPEED = re.compile(
    r"\b((too|so|very|really|painfully|quite|a bit|kind of|was|is) slow|sluggish|faster|quicker|"
    r"speed (it |this |things )?up)\b"
)
_SPEED_NEGATED = re.compile(r"\b(not|wasn't|isn't|never|n't)\s+(too |that |so |at all )?slow\b")
_SHORTER = re.compile(
    r"\b(too (long|verbose|wordy|lengthy)|shorter|more concise|be concise|"
    r"too much (text|detail|details|info|information)|tl;?dr|less detail|get to the point|long-winded|rambl\w*)\b"
)
_LONGER = re.compile(
    r"\b(more (detail|details|detailed|depth|in-depth|thorough)|too (short|brief|shallow)|"
    r"longer(?! than)|elaborate|go deeper)\b"
)
_CITATIONS = re.compile(  # not bare "sources": "more protein sources" is about food
    r"\b(cite|cites|cited|citing|citation|citations)\b|"
    r"\b(with|include|including|add|list|show|give|provide|link|links to|no|missing|without|need|want)\s+"
    r"(the |your |any |some |more |its |their )?(sources|references)\b|\b(sources|references)\s+(please|would|should)\b"
)
_CITATIONS_NEGATED = re.compile(
    r"\b(no need for|(don't|do not|didn't|did not|doesn't|does not) need|(don't|do not) want|without|fewer|less|"
    r"too many|stop citing)\s+(the |any |all )?(\w+ )?(cit\w*|sources?|references)\b"
)
_EXAMPLES = re.compile(r"\b(more examples|with examples|an example|code examples|show examples|examples please)\b")
_ALLERGY = re.compile(r"\ballergic to ([a-z][a-z' -]*?)(?=$|[,;.!?]| and (?:i|we|the|it)\b| but\b| so\b)")

_LIKE_TRIGGERS: tuple[tuple[str, ...], ...] = (
    ("more",),
    ("extra",),
    ("love",),
    ("loved",),
    ("enjoyed",),
    ("liked",),
    ("really", "like"),
)
_DISLIKE_TRIGGERS: tuple[tuple[str, ...], ...] = (
    ("no", "more"),
    ("not", "so", "many"),
    ("not", "so", "much"),
    ("too", "many"),
    ("too", "much"),
    ("less",),
    ("fewer",),
    ("without",),
    ("hate",),
    ("hated",),
    ("dislike",),
    ("disliked",),
    ("don't", "like"),
    ("didn't", "like"),
    ("do", "not", "like"),
    ("did", "not", "like"),
    ("didn't", "enjoy"),
    ("not", "a", "fan", "of"),
    ("tired", "of"),
    ("sick", "of"),
)
_TOO_NOT_DISLIKES = frozenset(
    "expensive pricey costly slow long short brief verbose wordy lengthy much many late early good bad little few "
    "cheap shallow generic far big small".split()
)
_TOKEN = re.compile(r"[a-z][a-z0-9'-]*|[,;.!?]")


def _normalize(text: str) -> str:
    text = text.casefold().replace("\u2019", "'").replace("\u2018", "'")
    text = re.sub(r"\b(gluten|dairy|lactose|nut|sugar|meat)\s+free\b", r"\1-free", text)
    text = re.sub(r"\blow\s+(carb|sodium)\b", r"low-\1", text)
    text = re.sub(r"\b(didnt|dont|doesnt|isnt|wasnt|cant)\b", lambda m: m.group(1)[:-1] + "'t", text)
    return re.sub(r"\bweek[ -]nights?\b", "weeknight", text)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"[.!?;\n]+", text) if s.strip()]


def _items_after(tokens: list[str], start: int) -> list[str]:
    """The things named right after a trigger: "more vegetarian and fish dishes" -> [vegetarian, fish]."""
    items: list[list[str]] = [[]]
    index = start
    while index < len(tokens) and sum(len(i) for i in items) < 6:
        token = tokens[index]
        if token in ("and", "or", ","):
            ahead = index + 1
            while ahead < len(tokens) and tokens[ahead] in _LEADING:  # "and the pasta"
                ahead += 1
            following = tokens[ahead] if ahead < len(tokens) else ""
            if not items[-1] or not following or following in _BOUNDARY or following in ",;.!?":
                break
            items.append([])
        elif token in ",;.!?" or (token in _BOUNDARY and not (token in _LEADING and not items[-1])):
            break
        elif not (token in _LEADING and not items[-1]):
            items[-1].append(token)
        index += 1
    found: list[str] = []
    for words in items:
        while len(words) > 1 and words[-1] in _GENERIC_NOUNS:
            words = words[:-1]
        phrase = " ".join(words)
        if phrase and phrase not in _NOT_ITEMS and phrase not in _GENERIC_NOUNS and words[0] not in _NOT_ITEMS:
            found.append(phrase)
    return found


def _match_at(tokens: list[str], index: int, trigger: tuple[str, ...]) -> bool:
    return tuple(tokens[index : index + len(trigger)]) == trigger


def _likes_and_dislikes(sentence: str) -> tuple[list[str], list[str]]:
    tokens = _TOKEN.findall(sentence)
    likes: list[str] = []
    dislikes: list[str] = []
    index = 0
    while index < len(tokens):
        for trigger in _DISLIKE_TRIGGERS:  # before likes: "no more X" must not read as "more X"
            if _match_at(tokens, index, trigger):
                dislikes += _items_after(tokens, index + len(trigger))
                index += len(trigger)
                break
        else:
            for trigger in _LIKE_TRIGGERS:
                if _match_at(tokens, index, trigger):
                    likes += _items_after(tokens, index + len(trigger))
                    index += len(trigger)
                    break
            else:
                if tokens[index] == "too" and index + 1 < len(tokens):
                    word = tokens[index + 1]
                    if word not in _TOO_NOT_DISLIKES and word not in _BOUNDARY and word not in ",;.!?":
                        dislikes.append(word)  # "too spicy for the kids" -> dislikes spicy
                index += 1
    return likes, dislikes


def _clauses(sentence: str) -> list[str]:
    return [
        c.strip() for c in re.split(r",|\bbut\b|\bhowever\b|\balthough\b|\bthough\b|\band\b", sentence) if c.strip()
    ]


def _complaint(text: str, quality: Any) -> tuple[bool, str | None]:
    negative: list[str] = []
    for sentence in _sentences(text):
        for clause in _clauses(sentence):
            if _NEGATIVE.search(_NOT_NEGATIVE.sub(" ", clause)) and not _BUDGET_NEGATED.search(clause):
                negative.append(clause)
    low_rating = isinstance(quality, int) and not isinstance(quality, bool) and quality <= 2
    if negative:
        return True, "; ".join(dict.fromkeys(negative))[:300]
    if low_rating:
        return True, f"rated {quality}/5: {text[:200]}"
    return False, None


def offline_preference_policy(request: LLMRequest) -> PreferenceExtraction:
    """The scripted model's deterministic reading of feedback text, for offline runs and tests.

    It knows the common shapes of feedback (cost, diet, likes and dislikes, speed, length,
    citations) well enough to be useful without an API key; the real model handles the rest.
    """
    raw = request.hints.get("text")
    if not raw:
        content = next((m.get("content", "") for m in reversed(request.messages) if m.get("role") == "user"), "")
        raw = content.split("<<<", 1)[-1].rsplit(">>>", 1)[0]
    text = _normalize(raw or "")
    found: list[Preference] = []

    def add(key: str, value: Any, confidence: float) -> None:
        found.append(Preference(key=key, value=value, confidence=confidence))

    for sentence in _sentences(text):
        if _BUDGET_LOWER.search(sentence) and not _BUDGET_NEGATED.search(sentence):
            explicit = re.search(r"too |over |overpriced|pricey", sentence) is not None
            add(_budget_key(sentence), "lower", 0.9 if explicit else 0.75)
        elif _BUDGET_HIGHER.search(sentence):
            add(_budget_key(sentence), "higher", 0.8)

        likes, dislikes = _likes_and_dislikes(sentence)
        for term in _DIETARY:
            for match in re.finditer(rf"(?<![a-z-]){re.escape(term)}(?![a-z-])", sentence):
                before = sentence[: match.start()]
                if _NEGATED_BEFORE.search(before) or any(term in item.split() for item in dislikes):
                    continue
                if any(term in item.split() for item in likes) and not _DIETARY_STRONG.search(sentence):
                    continue  # "more vegetarian options" is a taste, not a restriction
                add("dietary_restrictions", [term], 0.9 if _DIETARY_STRONG.search(sentence) else 0.7)
                break
        for allergy in _ALLERGY.finditer(sentence):
            items = [i.strip() for i in re.split(r",|\band\b|\bor\b", allergy.group(1)) if i.strip()]
            if items:
                add("allergies", items, 0.95)
        if likes:
            add("likes", likes, 0.8)
        if dislikes:
            add("dislikes", dislikes, 0.8)

        waited = _WAITED.search(sentence) is not None
        if waited or (_SPEED.search(sentence) and not _SPEED_NEGATED.search(sentence)):
            add("speed", "faster", 0.85)
        if _SHORTER.search(_WAITED.sub(" ", sentence)):  # "took too long" is about speed, not length
            add("verbosity", "shorter", 0.85)
        elif _LONGER.search(sentence):
            add("verbosity", "longer", 0.8)
        if _CITATIONS_NEGATED.search(sentence):
            add("wants_citations", False, 0.8)
        elif _CITATIONS.search(sentence):
            add("wants_citations", True, 0.85)
        if _EXAMPLES.search(sentence):
            add("wants_examples", True, 0.8)

    complaint, summary = _complaint(text, request.hints.get("quality"))
    return PreferenceExtraction(preferences=combine(found), complaint=complaint, complaint_summary=summary)


def _budget_key(sentence: str) -> str:
    if "weeknight" in sentence:
        return "weeknight_budget"
    if re.search(r"\bweekends?\b", sentence):
        return "weekend_budget"
    return "budget"
