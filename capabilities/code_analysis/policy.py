"""The offline policy: how the scripted model answers for code analysis, with no API key.

It is deterministic and honest: it plans real searches from the question's identifiers
and keywords, and its findings only restate what the tools returned (a definition's
signature, a matching line's text), each citing the line it came from. Like a real model,
it reads only the facts its stage gave it (`request.facts`).
"""

from __future__ import annotations

import re
from typing import Any

from capabilities.code_analysis.evidence import read_definition, read_digest
from capabilities.code_analysis.models import (
    CriticOutput,
    Finding,
    IntentOutput,
    IntentType,
    PlanOutput,
    PlanStep,
    SynthesisOutput,
)
from missions.core.llm import LLMRequest

STOPWORDS = frozenset(
    """
a about after all also an and any are as at be been by can code could do does doing done each
explain find for from get has have how i if in into is it its me my of on or our repo repository
should show so tell that the their them then there these this those to use used uses using was what
when where which who why will with work works would you your project file files function functions
class classes method methods defined define implemented implement happen happens handle handled
handles help please something anything stuff thing things look need want know question
""".split()
)
IDENTIFIER = re.compile(
    r"`([^`]+)`|\b([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)\b|"
    r"\b([a-z]+_[a-z0-9_]+|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[a-z]+[A-Z][A-Za-z0-9]*)\b"
)
GOAL_SPLIT = re.compile(r"\?|;|,\s*and\s+|\band also\b|\bas well as\b")
MAX_FINDINGS = 8


def identifiers(text: str) -> list[str]:
    found = [next(g for g in m.groups() if g) for m in IDENTIFIER.finditer(text)]
    return list(dict.fromkeys(f.strip("()") for f in found if f))


def keywords(text: str) -> list[str]:
    idents = {i.lower() for i in identifiers(text)}
    words = re.findall(r"[A-Za-z][A-Za-z0-9_-]{2,}", text)
    return list(dict.fromkeys(w.lower() for w in words if w.lower() not in STOPWORDS and w.lower() not in idents))


def stem(word: str) -> str:
    """A crude English stem, enough to match 'answered' with answer_interrupt."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def _intent(request: LLMRequest) -> IntentOutput:
    text = str(request.facts.get("question") or "")
    earlier = [str(name) for name in request.facts.get("in_focus_earlier") or [] if identifiers(str(name))]
    if earlier and not identifiers(text):  # a follow-up: "it" is what the conversation was about
        referred = re.sub(r"\b(it|this|that)\b", earlier[0], text, count=1)
        text = referred if referred != text else f"{text} ({earlier[0]})"
    parts = [p.strip(" .,") for p in GOAL_SPLIT.split(text) if p and p.strip(" .,")]
    goals = [p for p in parts if identifiers(p) or keywords(p)][:3]
    terms = (identifiers(text) + keywords(text))[:12]
    if not terms:
        return IntentOutput(
            goals=[text or "?"],
            clarification_needed=True,
            clarification_question="Which function, class, file or behaviour should I look into?",
        )
    lowered = text.lower()
    kind: IntentType = (
        "locate"
        if lowered.startswith(("where", "which file", "find"))
        else ("trace" if "flow" in lowered or "call" in lowered else "explain")
    )
    return IntentOutput(intent_type=kind, goals=goals or [text], search_terms=terms)


def _plan(request: LLMRequest) -> PlanOutput:
    goal = str(request.facts.get("current_goal") or "")
    broaden = int(request.facts.get("attempt") or 1) > 1  # an earlier plan for this goal found nothing
    idents, words = identifiers(goal), keywords(goal)
    steps: list[PlanStep] = []
    for ident in idents[:3]:
        steps.append(
            PlanStep(
                tool="code.find_symbol",
                params={"name": ident.split(".")[-1] if "." in ident and ident[0].islower() else ident},
                why=f"find where {ident} is defined",
            )
        )
        steps.append(
            PlanStep(
                tool="code.grep",
                params={"pattern": re.escape(ident.split(".")[-1]), "glob": "*.py", "max_matches": 20},
                why=f"find where {ident} is used",
            )
        )
    stems = [stem(w) for w in words]
    if broaden:  # identifier parts too
        stems += [stem(p) for i in idents for p in re.split(r"[_.]|(?<=[a-z])(?=[A-Z])", i) if len(p) > 3]
    for word in list(dict.fromkeys(stems))[: 3 if not idents else 2]:
        steps.append(
            PlanStep(
                tool="code.grep",
                params={
                    "pattern": rf"^\s*(async def|def|class) \w*{re.escape(word)}",
                    "glob": "*.py",
                    "ignore_case": True,
                    "max_matches": 20,
                },
                why=f"find definitions named after '{word}'",
            )
        )
        steps.append(
            PlanStep(
                tool="code.grep",
                params={"pattern": re.escape(word), "glob": "*.py", "ignore_case": True, "max_matches": 20},
                why=f"find code mentioning '{word}'",
            )
        )
    if not steps:
        steps.append(
            PlanStep(tool="code.list_files", params={"pattern": "*.py"}, why="nothing specific to search: survey")
        )
    return PlanOutput(
        goal=goal,
        steps=steps[:8],
        reasoning=f"search definitions of {idents[:3]} and mentions of {stems[:4]}"
        + (" (broadened after an empty first attempt)" if broaden else ""),
    )


def _synthesize(request: LLMRequest) -> SynthesisOutput:
    goal = str(request.facts.get("current_goal") or "")
    terms = _terms(goal)
    scored: list[tuple[float, Finding]] = []
    for kind, file, line, text in read_digest(request.facts.get("evidence") or []):
        if kind == "definitions":
            what, qualname, signature, docstring = read_definition(text)
            doc = f": {docstring}" if docstring else ""
            claim = f"`{qualname}` is a {what} defined as `{signature}`{doc}"
            scored.append((10.0, Finding(claim=claim[:1000], citations=[f"{file}:{line}"])))
        elif kind == "matches":
            scored.append(_line_finding(file, line, text, terms, goal))
        else:
            score, finding = _line_finding(file, line, text, terms, goal)
            scored.append((score - 0.25, finding))  # context lines only count when they say something
    chosen = _pick(scored)
    hit = " ".join(f.claim.lower() for f in chosen)
    gaps = [f"nothing found for '{t}'" for t in terms if t not in hit][:3]
    files = sorted({f.citations[0].rsplit(":", 1)[0] for f in chosen})
    summary = (
        f"{len(chosen)} piece(s) of evidence across {len(files)} file(s), chiefly {', '.join(files[:3])}."
        if chosen
        else "The searches found no evidence for this goal."
    )
    return SynthesisOutput(summary=summary, findings=chosen, gaps=gaps)


def _terms(goal: str) -> list[str]:
    """Lower-cased identifiers, their parts, and keywords (with a crude stem) of a goal."""
    idents = identifiers(goal)
    parts = [p for i in idents for p in re.split(r"[_.]|(?<=[a-z])(?=[A-Z])", i) if len(p) > 3]
    words = [stem(w) for w in keywords(goal)]
    return list(dict.fromkeys(t.lower() for t in idents + parts + words))


def _line_finding(file: str, line: int, text: str, terms: list[str], goal: str) -> tuple[float, Finding]:
    code = text.strip()
    lowered = code.lower()
    score = float(sum(t in lowered for t in terms))
    if not score or lowered.startswith(("import ", "from ")) or goal.lower()[:40] in lowered:
        score -= 5  # imports and quotes of the question itself explain nothing
    if code.startswith(("def ", "async def ", "class ")):
        name = re.split(r"[\s(:]", code.split(" ", 2)[-1 if code.startswith("async") else 1])[0].lower()
        score += 1 + 2 * any(t in name for t in terms)  # a definition named after the question
    elif code.startswith(("if ", "raise ", "return ", "while ", "for ")):
        score += 1
    if file.startswith("tests") or "/tests/" in file:
        score -= 1.5  # tests are evidence too, but the code under test answers the question
    else:
        score += 0.5
    finding = Finding(claim=f"{file} line {line} reads `{code[:200]}`", citations=[f"{file}:{line}"])
    return score, finding


def _pick(scored: list[tuple[float, Finding]]) -> list[Finding]:
    """The best findings, at most two per file and each line once, strongest first."""
    chosen: list[Finding] = []
    seen: set[str] = set()
    per_file: dict[str, int] = {}
    for score, finding in sorted(scored, key=lambda pair: -pair[0]):
        ref = finding.citations[0]
        file = ref.rsplit(":", 1)[0]
        if score <= 0 or ref in seen or per_file.get(file, 0) >= 2:
            continue
        seen.add(ref)
        per_file[file] = per_file.get(file, 0) + 1
        chosen.append(finding)
        if len(chosen) >= MAX_FINDINGS:
            break
    return chosen


def _critique(request: LLMRequest) -> CriticOutput:
    facts = request.facts
    goals: list[str] = facts.get("goals") or []
    done: list[str] = facts.get("answered_so_far") or []
    current: dict[str, Any] = facts.get("current") or {}
    goal = current.get("goal")
    if not current.get("findings") and int(facts.get("attempt") or 1) < 2:
        return CriticOutput(
            decision="REPLAN",
            verdict=f"no evidence yet for '{goal}'; broaden the search",
            remaining_goals=[g for g in goals if g not in done],
        )
    tried = {*done, *(facts.get("searched_without_findings") or [])}
    remaining = [g for g in goals if g not in tried]
    if remaining:
        return CriticOutput(
            decision="NEXT_STAGE", verdict=f"'{goal}' is covered as far as the code shows", remaining_goals=remaining
        )
    return CriticOutput(
        decision="COMPLETE",
        verdict="every goal has cited evidence"
        if len(done) == len(goals)
        else "every goal was searched; gaps are reported",
        remaining_goals=[],
    )


POLICIES: dict[str, Any] = {
    "intent": _intent,
    "planner": _plan,
    "synthesizer": _synthesize,
    "critic": _critique,
}


def offline_policy(request: LLMRequest) -> Any:
    try:
        return POLICIES[request.stage](request)
    except KeyError:
        raise LookupError(f"code_analysis has no offline policy for stage '{request.stage}'") from None
