"""The offline coach: deterministic answers for assess, workout and nutrition, so a plan needs no API key.

They follow what the user said (goal, stored profile and preferences in the context, adjustments).
"""

from __future__ import annotations

import re
from typing import Any

from missions.core.llm import LLMRequest

NUMBERS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
SLOTS = {2: "Tue Fri", 3: "Mon Wed Fri", 4: "Mon Tue Thu Fri", 5: "Mon Tue Wed Fri Sat", 6: "Mon Tue Wed Thu Fri Sat"}
LEVELS = {"beginner": r"beginner|new to|never|out of shape", "advanced": r"advanced|experienced|athlete"}
FOCUS = {
    "strength": r"strong|strength|muscle|bulk",
    "fat_loss": r"\blos[ei]|\bfat\b|\blean\b|weight loss",
    "endurance": r"\brun|marathon|\d+ ?k\b|endurance|cardio",
}
EQUIPMENT = {"gym": r"\bgym\b|barbell", "dumbbells": r"dumbbell|kettlebell", "bodyweight": r"bodyweight|no equip|home"}
DIETS = ["vegan", "vegetarian", "pescatarian", "gluten-free", "dairy-free", "nut-free"]
MOVES = ["legs", "hinge", "push", "pull", "core"]
KITS = {
    "gym": ["Back squat", "Romanian deadlift", "Bench press", "Barbell row", "Hanging knee raise"],
    "dumbbells": ["Goblet squat", "Dumbbell RDL", "Dumbbell press", "One-arm row", "Dead bug"],
    "bodyweight": ["Split squat", "Glute bridge", "Push-up", "Towel row", "Mountain climber"],
}
SESSIONS = {  # focus -> the two sessions training days alternate between: (title, opener, moves)
    "fat_loss": [("Full-body circuit", None, MOVES), ("Conditioning", "Intervals: 8 x 30 s hard, 60 s easy", ["core"])],
    "endurance": [
        ("Easy run", "Run {minutes} min at a pace you can talk at", []),
        ("Strength", None, ["legs", "hinge", "core"]),
    ],
    "strength": [("Full body A", None, ["legs", "push", "pull", "core"]), ("Full body B", None, MOVES[1:])],
}
DOSE = {"beginner": "2x10", "intermediate": "3x8", "advanced": "5x5"}
TARGET = {
    "fat_loss": "300-500 kcal under maintenance; protein 1.6-2.2 g/kg",
    "strength": "200-300 kcal over maintenance; protein 1.6-2.2 g/kg",
    "endurance": "maintenance; carbohydrate 5-7 g/kg on training days",
    "general": "maintenance; protein 1.2-1.6 g/kg",
}
MENUS = {  # diet -> (proteins, breakfasts)
    "vegan": (["Tofu", "Tempeh", "Lentil"], ["Oats, soy milk, peanut butter and berries", "Tofu scramble on toast"]),
    "vegetarian": (["Egg", "Chickpea", "Halloumi"], ["Greek yogurt, oats and berries", "Veggie omelette on toast"]),
    "pescatarian": (["Salmon", "Tuna", "Egg"], ["Eggs on toast with spinach", "Greek yogurt, oats and berries"]),
    "": (["Chicken", "Salmon", "Lean beef"], ["Eggs on toast with spinach", "Greek yogurt, oats and berries"]),
}
SWAPS = {
    "dairy-free": {"Greek yogurt": "Soy yogurt", "Halloumi": "Tempeh"},
    "gluten-free": {"toast": "rice cakes"},
    "nut-free": {"peanut butter": "sunflower seed butter", "nuts": "pumpkin seeds"},
}


def adjustments(envelope: Any) -> list[str]:
    """What the user asked to change when shown a plan, oldest first."""
    responses = [answer["response"] for answer in envelope.answers if answer["stage"] == "present"]
    return [r["text"] for r in responses if r.get("text") and not r.get("approved")]


def _read(text: str) -> dict[str, Any]:
    """The profile fields one piece of text states (absent ones are left out)."""
    text = text.lower()
    found: dict[str, Any] = {"level": next((level for level, rx in LEVELS.items() if re.search(rx, text)), None)}
    if days := re.search(r"\b(\d|" + "|".join(NUMBERS) + r")\s*(?:days?|times|x)\b", text):
        found["days_per_week"] = min(6, max(2, int(NUMBERS.get(days[1], days[1]))))
    if minutes := re.search(r"(\d+)\s*(?:min|minutes)\b|an hour", text):
        found["minutes_per_session"] = min(120, max(15, int(minutes[1] or 60)))
    found["equipment"] = [kit for kit, rx in EQUIPMENT.items() if re.search(rx, text)]
    focus = sorted((match.start(), name) for name, rx in FOCUS.items() if (match := re.search(rx, text)))
    found["focus"] = focus[0][1] if focus else None  # the first one named leads
    found["diet"] = [d for d in DIETS if d in text or (d == "nut-free" and "nut allerg" in text)]
    return {key: value for key, value in found.items() if value}


def assess(envelope: Any) -> dict[str, Any]:
    context, prefs = envelope.context, envelope.context.get("preferences") or {}
    profile = {
        "level": context.get("fitness_level", "beginner"),
        "days_per_week": context.get("days_per_week", 3),
        "minutes_per_session": context.get("minutes_per_session", 45),
        "equipment": context.get("equipment", ["bodyweight"]),
        "focus": "general",
    }
    diet = [*context.get("dietary_restrictions", []), *prefs.get("dietary_restrictions", [])]
    diet += ["nut-free" for allergy in prefs.get("allergies", []) if "nut" in allergy]
    for text in [envelope.raw_input, *adjustments(envelope)]:  # the latest word wins
        stated = _read(text)
        diet += stated.pop("diet", [])
        profile.update(stated)
    diet = [d for d in dict.fromkeys(diet) if not ("vegan" in diet and d in ("vegetarian", "pescatarian"))]
    summary = f"{profile['level']}, {profile['days_per_week']} days x {profile['minutes_per_session']} min"
    summary += f", {profile['focus'].replace('_', ' ')}" + "".join(f", {d}" for d in diet)
    return {**profile, "dietary_restrictions": diet, "summary": summary}


def workout(envelope: Any) -> dict[str, Any]:
    p = envelope.output("assess")
    kit = dict(zip(MOVES, KITS[next((k for k in KITS if k in p["equipment"]), "bodyweight")], strict=True))
    sessions = []
    for index, day in enumerate(SLOTS[p["days_per_week"]].split()):
        title, opener, moves = SESSIONS.get(p["focus"], SESSIONS["strength"])[index % 2]
        exercises = [opener.format(minutes=p["minutes_per_session"])] if opener else []
        exercises += [f"{kit[move]} {DOSE[p['level']] if move != 'core' else '3x12'}" for move in moves]
        sessions.append({"day": day, "title": title, "exercises": exercises})
    step = "add 10% running time a week" if p["focus"] == "endurance" else "add a rep a week, then load"
    return {"sessions": sessions, "progression": f"{step}; every 4th week, ease off by a third."}


def nutrition(envelope: Any) -> dict[str, Any]:
    p = envelope.output("assess")
    diet = set(p["dietary_restrictions"])
    proteins, breakfasts = MENUS[next((d for d in MENUS if d in diet), "")]
    meals = {
        "breakfast": breakfasts,
        "lunch": [f"{protein} grain bowl with roast vegetables" for protein in proteins],
        "dinner": [f"{protein}, rice or potatoes, and greens" for protein in proteins],
        "snack": ["Fruit and a handful of nuts", "Hummus and carrots"],
    }
    for old, new in (pair for d in sorted(diet & set(SWAPS)) for pair in SWAPS[d].items()):
        meals = {meal: [option.replace(old, new) for option in options] for meal, options in meals.items()}
    tips = ["A protein source at every meal", "2-3 litres of water a day", "Carbohydrate 2-3 h before training"]
    tips += ["Take B12; check iron and omega-3"] if "vegan" in diet else []
    menu = [{"meal": meal, "options": options} for meal, options in meals.items()]
    return {"daily_target": TARGET[p["focus"]], "meals": menu, "guidelines": tips}


def offline_policy(request: LLMRequest) -> dict[str, Any]:
    """The scripted model's answer for one LLM stage (validated against the stage's output model)."""
    return {"assess": assess, "workout": workout, "nutrition": nutrition}[request.stage](request.envelope)
