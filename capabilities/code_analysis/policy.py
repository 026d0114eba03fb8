"""The offline policy: how the scripted model answers for code analysis, with no API key.

It is deterministic and honest: it plans real searches from the question's identifiers
and keywords, and its findings only restate what the tools returned (a definition's
signature, a matching line's text), each citing the line it came from. Like a real model,
it reads only the facts its stage gave it (`request.facts`).
"""

from __future__ import annotations

import re
from typing import Any

from capabilities.code_analysis.evidence import DEFINED, Line, read_call, read_definition, read_digest
from capabilities.code_analysis.history import CHANGE
from capabilities.code_analysis.models import (
    CriticOutput,
    Finding,
    IntentOutput,
    IntentType,
    PlanOutput,
    PlanStep,
    SynthesisOutput,
)
from capabilities.code_analysis.questions import Question, classify, identifiers, keywords, stem
from missions.core.llm.provider import LLMRequest

GOAL_SPLIT = re.compile(r"\?|;|,\s*and\s+|\band also\b|\bas well as\b|\band (?=(?:who|what|where|how|which)\b)")
PRONOUN = re.compile(r"\b(it|this|that|them|its)\b", re.IGNORECASE)
MAX_FINDINGS = 8
INTENT_TYPES: dict[str, IntentType] = {
    "definition": "locate",
    "callers": "locate",
    "setting": "locate",
    "event": "locate",
    "path": "trace",
    "explain": "explain",
    "history": "explain",
    "search": "explain",
}


def _intent(request: LLMRequest) -> IntentOutput:
    text = str(request.facts.get("question") or "")
    earlier = [str(name) for name in request.facts.get("in_focus_earlier") or [] if identifiers(str(name))]
    parts = [p.strip(" .,") for p in GOAL_SPLIT.split(text) if p and p.strip(" .,")]
    goals: list[str] = []
    focus = earlier[0] if earlier else None
    for part in parts:
        subjects = classify(part).subjects
        if not subjects and focus and PRONOUN.search(part):  # "it": what the question or conversation was about
            part = PRONOUN.sub(focus, part, count=1)
        elif not subjects and focus and not keywords(part):
            part = f"{part} ({focus})"
        asked = classify(part)
        focus = asked.subjects[0] if asked.subjects else focus
        if asked.subjects or asked.terms:
            goals.append(part)
    goals = goals[:3]
    terms = list(dict.fromkeys(t for g in goals for q in [classify(g)] for t in (*q.subjects, *q.terms)))[:12]
    if not goals:
        return IntentOutput(
            goals=[text or "?"],
            clarification_needed=True,
            clarification_question="Which function, class, file or behaviour should I look into?",
        )
    return IntentOutput(intent_type=INTENT_TYPES[classify(goals[0]).kind], goals=goals, search_terms=terms)


def _step(tool: str, why: str, **params: object) -> PlanStep:
    return PlanStep(tool=tool, params=dict(params), why=why)


def _plan(request: LLMRequest) -> PlanOutput:
    """Tools chosen by what the goal asks: definitions from the index, callers from call sites, a path
    from the call graph; text search only for words (stems, case-insensitive), never question words."""
    goal = str(request.facts.get("current_goal") or "")
    broaden = int(request.facts.get("attempt") or 1) > 1  # an earlier plan for this goal found nothing
    asked = classify(goal)
    subjects, steps = asked.subjects[:2], []
    for subject in subjects:
        if asked.kind == "definition":
            steps.append(_step("code.find_symbol", f"find where {subject} is defined", name=subject))
            if broaden:
                steps.append(_step("code.find_references", f"find {subject} named anywhere", name=subject))
        elif asked.kind == "callers":
            tool = "code.find_references" if broaden else "code.find_callers"
            steps.append(_step(tool, f"find the code that calls {subject}", name=subject))
            steps.append(_step("code.find_symbol", f"find where {subject} is defined", name=subject))
        elif asked.kind == "explain":
            steps.append(_step("code.find_symbol", f"read the definition of {subject}", name=subject))
            steps.append(_step("code.callees", f"find what {subject} calls", name=subject))
            if broaden:
                steps.append(_step("code.find_references", f"find how {subject} is used", name=subject))
        elif asked.kind != "path":
            steps.append(_step("code.find_symbol", f"find where {subject} is defined", name=subject))
            steps.append(_step("code.find_references", f"find where {subject} is used", name=subject))
    if asked.kind == "path" and len(asked.subjects) == 2:
        source, target = asked.subjects
        depth = 6 if broaden else 4
        steps.append(
            _step(
                "code.call_path",
                f"find how {source} reaches {target}",
                source=source,
                target=target,
                max_depth=depth,
            )
        )
        steps.append(_step("code.find_symbol", f"find where {source} is defined", name=source))
        if broaden:
            steps.append(_step("code.find_callers", f"find what calls {target}", name=target))
    terms = list(asked.terms)
    if broaden:  # identifier parts too
        terms += [stem(p.lower()) for i in subjects for p in re.split(r"[_.]|(?<=[a-z])(?=[A-Z])", i) if len(p) > 3]
    for term in list(dict.fromkeys(terms))[: 3 if not subjects else 2]:
        if asked.kind in ("definition", "callers", "path", "explain") and subjects and not broaden:
            break  # the index answers these; words would only add lines beside the point
        steps.append(
            _step(
                "code.grep",
                f"find definitions named after '{term}'",
                pattern=rf"^\s*(export\s+)?(async\s+)?(def|class|function|func|interface|type)\s+\w*{re.escape(term)}",
                ignore_case=True,
                max_matches=20,
            )
        )
        steps.append(
            _step(
                "code.grep", f"find code mentioning '{term}'", pattern=re.escape(term), ignore_case=True, max_matches=20
            )
        )
    if not steps:
        steps.append(_step("code.list_files", "nothing specific to search: survey", pattern="*"))
    return PlanOutput(
        goal=goal,
        steps=steps[:8],
        reasoning=f"a {asked.kind} question about {subjects or 'no named symbol'}; words searched: {terms[:4]}"
        + (" (broadened after an empty first attempt)" if broaden else ""),
    )


def _synthesize(request: LLMRequest) -> SynthesisOutput:
    """Findings of the kind the goal asks for (a definition, its call sites, a path's hops), each
    restating one evidence line; gaps only for what the evidence says was searched and not found."""
    goal = str(request.facts.get("current_goal") or "")
    asked = classify(goal)
    lines = list(read_digest(request.facts.get("evidence") or []))
    chosen = _answer(asked, lines) or _pick([_scored(line, _terms(goal), goal, asked.subjects) for line in lines])
    gaps = [f"nothing found for '{m['term']}': {m['searched']}" for m in request.facts.get("not_found") or []]
    gaps += [
        str(section["failed"]).removeprefix("not_found: ")
        for section in request.facts.get("evidence") or []
        if str(section.get("failed", "")).startswith("not_found: ") and not chosen
    ]
    if asked.kind == "history":  # a history that could not be read is said, with the server's reason
        gaps += [
            f"the history could not be read: {section['failed']}"[:500]
            for section in request.facts.get("evidence") or []
            if str(section.get("tool", "")).startswith("git__") and section.get("failed")
        ]
    files = sorted({f.citations[0].rsplit(":", 1)[0] for f in chosen})
    summary = (
        f"{len(chosen)} piece(s) of evidence across {len(files)} file(s), chiefly {', '.join(files[:3])}."
        if chosen
        else "The searches found no evidence for this goal."
    )
    return SynthesisOutput(summary=summary, findings=chosen, gaps=list(dict.fromkeys(gaps))[:3])


def _names(subject: str, qualname: str) -> bool:
    wanted = subject.split(".")
    return qualname.split(".")[-len(wanted) :] == wanted


def _definition_finding(line: Line) -> Finding:
    what, qualname, signature, docstring = read_definition(line.text)
    doc = f": {docstring}" if docstring else ""
    claim = f"`{qualname}` is a {what} defined at {line.file}:{line.line} as `{signature}`{doc}"
    return Finding(claim=claim[:1000], citations=[f"{line.file}:{line.line}"])


def _call_finding(line: Line, verb: str = "calls") -> Finding:
    code, name, caller = read_call(line.text)
    who = caller if caller != "module level" else f"module-level code in {line.file}"  # quoted: only the line's text
    claim = f"{who} {verb} `{name}` at {line.file}:{line.line}: `{code.strip()[:200]}`"
    return Finding(claim=claim, citations=[f"{line.file}:{line.line}"])


def _answer(asked: Question, lines: list[Line]) -> list[Finding]:
    """The findings a question of this kind is answered by, or [] to fall back to scored lines."""
    subjects = asked.subjects
    definitions = [
        line
        for line in lines
        if line.kind == "definitions" and any(_names(s, read_definition(line.text)[1]) for s in subjects)
    ]
    found: list[Finding] = []
    if asked.kind == "definition":
        found = [_definition_finding(line) for line in definitions]
    elif asked.kind == "callers":
        calls = [
            line
            for line in lines
            if line.kind == "calls" or (line.kind == "references" and line.text.endswith("(call)"))
        ]
        calls.sort(key=lambda line: _is_test(line.file))  # the code under test first; tests call it too
        found = [_call_finding(line) for line in calls] or [_definition_finding(line) for line in definitions[:1]]
    elif asked.kind == "explain":
        terms = [t for t in asked.terms if len(t) > 3]
        members = [line for line in lines if line.kind == "definitions" and line not in definitions]
        about = [m for m in members if any(t in m.text.lower() for t in terms)] or members[:2]
        calls = [line for line in lines if line.kind == "callees"]
        # what it calls of the repository's own code first (builtins say little), words of the goal before that
        calls.sort(key=lambda line: (-sum(t in line.text.lower() for t in terms), DEFINED not in line.text))
        found = [_definition_finding(line) for line in [*definitions[:1], *about[:3]]]
        found += [_call_finding(line) for line in calls][: MAX_FINDINGS - len(found)]
    elif asked.kind == "history":
        found = [finding for line in lines if line.kind == "changes" for finding in [_change_finding(line)] if finding]
    elif asked.kind == "path":
        hops = [_call_finding(line) for line in lines if line.kind == "path"]
        if hops:
            source = [
                _definition_finding(line) for line in definitions if _names(subjects[0], read_definition(line.text)[1])
            ]
            found = source[:1] + hops
    return _unique(found)[:MAX_FINDINGS]


def _change_finding(line: Line) -> Finding | None:
    """A line's last change, as the commit tells it: when, by whom, why, and what the line was before."""
    said = CHANGE.match(line.text)
    if said is None:
        return None
    before = f" (before: `{said['before'][:150]}`)" if said["before"] else " (the line was added then)"
    claim = (
        f"`{said['text'][:150]}` at {line.file}:{line.line} last changed in commit {said['commit']} on "
        f'{said["date"]} by {said["author"]}: "{said["why"][:300]}"{before}'
    )
    return Finding(claim=claim[:1000], citations=[f"{line.file}:{line.line}"])


def _unique(findings: list[Finding]) -> list[Finding]:
    seen: set[str] = set()
    kept = []
    for finding in findings:
        if finding.citations[0] not in seen:
            seen.add(finding.citations[0])
            kept.append(finding)
    return kept


def _is_test(file: str) -> bool:
    name = file.rsplit("/", 1)[-1]
    return (
        file.startswith(("tests/", "test/"))
        or "/tests/" in file
        or "/test/" in file
        or name.startswith("test_")
        or "_test." in name
        or ".test." in name
        or ".spec." in name
    )


def _scored(line: Line, terms: list[str], goal: str, subjects: list[str]) -> tuple[float, Finding]:
    if line.kind == "definitions":
        return 10.0 if any(t in line.text.lower() for t in terms) else 1.0, _definition_finding(line)
    calls = ("calls", "callees", "path", "references")
    text = read_call(line.text)[0] if line.kind in calls and "  # " in line.text else line.text
    score, finding = _line_finding(line.file, line.line, text, terms, goal)
    if subjects and not any(s.split(".")[-1].lower() in text.lower() for s in subjects):
        score -= 3  # a question about a name is answered by lines that name it
    return (score - 0.25 if line.kind == "code_read" else score), finding  # context lines count when they say something


def _terms(goal: str) -> list[str]:
    """Lower-cased subjects, their parts, and the goal's other words (stemmed) of a goal."""
    asked = classify(goal)
    parts = [p for i in asked.subjects for p in re.split(r"[_.]|(?<=[a-z])(?=[A-Z])", i) if len(p) > 3]
    return list(dict.fromkeys(t.lower() for t in [*asked.subjects, *parts, *asked.terms]))


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
    check: dict[str, Any] = facts.get("evidence_check") or {}
    if check.get("answers") is False and int(facts.get("attempt") or 1) < 2:
        return CriticOutput(
            decision="REPLAN",
            verdict=f"the evidence does not answer '{goal}': {check.get('why')}",
            remaining_goals=[g for g in goals if g not in done],
        )
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
