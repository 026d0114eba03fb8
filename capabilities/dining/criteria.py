"""Search criteria: what the goal asks for (the model's job), then the user's stored preferences.

The model only reads the goal. Preferences are applied here, in code, so a learned preference
("too expensive for a weeknight") changes every later search the same way whichever model runs:
  - `budget` / `weeknight_budget` / `weekend_budget`: "lower" (x0.6), "higher" (x1.5) or a number
    (dollars per person) moves the price ceiling; the weeknight one applies on weeknights only;
  - `dietary_restrictions` are required; dietary words among `likes` are preferred;
  - `max_distance_km` narrows the search radius.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from capabilities.dining.connectors import DAYS, DIETARY, WEEKEND

WEEKNIGHTS = frozenset({"monday", "tuesday", "wednesday", "thursday"})
BUDGET_FACTORS = {"lower": 0.6, "higher": 1.5}
DEFAULT_CEILING = 60.0  # dollars per person, when the capability's defaults say nothing
DEFAULT_RADIUS_KM = 5.0
DEFAULT_TIME = "19:30"


class GoalCriteria(BaseModel):
    """The planner model's structured answer: only what the goal itself says."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    cuisine: str | None = Field(None, description="one lower-case cuisine word, e.g. italian; null for any")
    day: str | None = Field(None, description="weekday name in lower case, or null")
    time: str = Field(DEFAULT_TIME, description="24h HH:MM")
    party_size: int = Field(2, ge=1, le=20)
    weeknight: bool = Field(False, description="the goal is about a weeknight (Monday to Thursday evening)")
    dietary: list[str] = Field(default_factory=list, description="dietary needs the goal states")
    max_price_per_person: float | None = Field(None, gt=0)
    max_distance_km: float | None = Field(None, gt=0)

    @field_validator("cuisine", "day", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() or None if isinstance(value, str) else value

    @field_validator("day")
    @classmethod
    def _known_day(cls, value: str | None) -> str | None:
        return value if value in DAYS else None

    @field_validator("time", mode="before")
    @classmethod
    def _hhmm(cls, value: Any) -> Any:
        if isinstance(value, str) and (match := re.fullmatch(r"\s*([01]?\d|2[0-3]):([0-5]\d)\s*", value)):
            return f"{int(match[1]):02d}:{match[2]}"
        return DEFAULT_TIME

    @field_validator("dietary", mode="before")
    @classmethod
    def _known_diets(cls, value: Any) -> Any:
        return [d for d in DIETARY if any(d in _fold(str(v)) for v in value or [])]


def _fold(text: str) -> str:
    return re.sub(r"\bgluten[ _]free\b", "gluten-free", text.lower())


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if value > 0 else None
    if isinstance(value, str) and (match := re.search(r"\d+(?:\.\d+)?", value)):
        return float(match[0])
    return None


def adjusted(ceiling: float, preference: Any) -> float | None:
    """A budget preference applied to a ceiling: a number replaces it, lower/higher scale it."""
    if (number := _number(preference)) is not None:
        return number
    if isinstance(preference, str):
        for word, factor in BUDGET_FACTORS.items():
            if word in preference.lower():
                return ceiling * factor
    return None


def plan_criteria(
    goal: GoalCriteria, preferences: dict[str, Any], context: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """The criteria every source is asked with, and a line per preference that changed them."""
    applied: list[str] = []
    ceiling = float(_number(context.get("price_ceiling_per_person")) or DEFAULT_CEILING)
    weeknight = goal.weeknight or goal.day in WEEKNIGHTS
    weekend = goal.day in WEEKEND
    keys = ["budget"] + (["weeknight_budget"] if weeknight else []) + (["weekend_budget"] if weekend else [])
    for key in keys:
        if key in preferences and (new := adjusted(ceiling, preferences[key])) is not None:
            applied.append(f"{key}={preferences[key]}: price ceiling ${ceiling:.0f} -> ${new:.0f} per person")
            ceiling = new
    if goal.max_price_per_person is not None and goal.max_price_per_person < ceiling:
        ceiling = goal.max_price_per_person

    radius = float(_number(context.get("max_distance_km")) or DEFAULT_RADIUS_KM)
    if (preferred := _number(preferences.get("max_distance_km"))) is not None and preferred < radius:
        applied.append(f"max_distance_km={preferred:g}: search radius {radius:g} km -> {preferred:g} km")
        radius = preferred
    if goal.max_distance_km is not None:
        radius = min(radius, goal.max_distance_km)

    required = list(goal.dietary)
    for diet in _diets(preferences.get("dietary_restrictions")):
        if diet not in required:
            required.append(diet)
            applied.append(f"dietary_restrictions: {diet} options required")
    preferred_diets = [d for d in _diets(preferences.get("likes")) if d not in required]
    applied += [f"likes {diet}: {diet} options preferred" for diet in preferred_diets]

    criteria = {
        "cuisine": goal.cuisine,
        "day": goal.day,
        "time": goal.time,
        "party_size": goal.party_size,
        "weeknight": weeknight,
        "max_price_per_person": round(ceiling),
        "max_distance_km": round(radius, 2),
        "dietary_required": required,
        "dietary_preferred": preferred_diets,
    }
    return criteria, applied


def _diets(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value] if isinstance(value, str) else []
    return [d for d in DIETARY if any(d in _fold(str(item)) for item in items)]


# --------------------------------------------------------------------------- the offline reading

CUISINES = ("italian", "japanese", "sushi", "indian", "mexican", "french", "chinese", "thai", "pizza")
_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "ten": 10}
_PARTY = re.compile(
    r"\b(?:for|party of|table for)\s+(\d{1,2}|" + "|".join(_NUMBERS) + r")\b(?!\s*(?:am|pm|:|\$|dollars|km|mi))"
    r"|\b(\d{1,2}|" + "|".join(_NUMBERS) + r")\s+(?:people|persons|guests|adults|of us)\b"
)
_CLOCK = re.compile(r"\b(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*(am|pm)\b|\b(?:at\s+)?([01]?\d|2[0-3]):([0-5]\d)\b")
_PRICE = re.compile(
    r"(?:under|below|less than|at most|max(?:imum)?|budget of|no more than)\s*\$\s*(\d+)|\$\s*(\d+)\s*(?:per|a|/)\s*"
    r"(?:person|head|pp)"
)
_DISTANCE = re.compile(r"within\s+(\d+(?:\.\d+)?)\s*(km|kilometers?|kilometres?|mi|miles?)\b")


def read_goal(text: str) -> GoalCriteria:
    """What the scripted model understands of a goal: a deterministic reading for offline runs."""
    lowered = _fold(text)
    cuisine = next((c for c in CUISINES if re.search(rf"\b{c}\b", lowered)), None)
    day = next((d for d in DAYS if re.search(rf"\b{d}s?\b", lowered)), None)
    if day is None and re.search(r"\bweekend\b", lowered):
        day = "saturday"
    time = DEFAULT_TIME
    if match := _CLOCK.search(lowered):
        if match[3]:
            hour = int(match[1]) % 12 + (12 if match[3] == "pm" else 0)
            time = f"{hour:02d}:{match[2] or '00'}"
        else:
            time = f"{int(match[4]):02d}:{match[5]}"
    elif re.search(r"\blunch\b", lowered):
        time = "12:30"
    elif re.search(r"\bbrunch\b", lowered):
        time = "11:00"
    party = 2
    if match := _PARTY.search(lowered):
        word = match[1] or match[2]
        party = int(word) if word.isdigit() else _NUMBERS[word]
    price = _PRICE.search(lowered)
    distance = _DISTANCE.search(lowered)
    return GoalCriteria(
        cuisine=cuisine,
        day=day,
        time=time,
        party_size=max(1, min(party, 20)),
        weeknight=bool(re.search(r"\bweek\s?-?nights?\b", lowered)) or day in WEEKNIGHTS,
        dietary=[d for d in DIETARY if re.search(rf"(?<![a-z-]){d}(?![a-z-])", lowered)],
        max_price_per_person=float(price[1] or price[2]) if price else None,
        max_distance_km=(float(distance[1]) * (1.609 if distance[2].startswith("mi") else 1.0)) if distance else None,
    )
