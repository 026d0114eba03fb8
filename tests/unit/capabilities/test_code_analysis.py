"""code_analysis: the evidence chain, its guarded stages, the offline policy, and a whole mission."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from capabilities.code_analysis import evidence
from capabilities.code_analysis.models import (
    CriticOutput,
    Finding,
    IntentOutput,
    Plan,
    PlanStep,
    Synthesis,
    SynthesisOutput,
    ToolRun,
    Traversal,
)
from capabilities.code_analysis.policy import offline_policy
from capabilities.code_analysis.stages import critic, synthesizer
from missions.adapters.llm.scripted import ScriptedProvider
from missions.core.capability import registry as registry
from missions.core.capability.registry import Ctx, EvidenceChainViolation
from missions.core.llm.provider import LLMRequest, LLMResult
from missions.core.mission.envelope import Bounds, Citation, Counters, Envelope
from missions.service.checkpoints import states
from tests.support.driver import DirectDriver

CAPABILITY = registry.load("code_analysis")  # built from capability.toml + the package's code
PIPELINE = CAPABILITY.pipeline
READ = [Citation(file="pkg/a.py", line=10, end_line=20), Citation(file="pkg/b.py", line=3)]


# -- the evidence chain ------------------------------------------------------------------------


@pytest.mark.parametrize("ref", ["pkg/a.py:10", "pkg/a.py:15", "pkg/a.py:20", "[pkg/a.py:12]", "pkg/b.py:3"])
def test_refs_inside_what_a_tool_returned_pass(ref: str):
    evidence.check([ref], READ, "the test")


def test_refs_outside_the_evidence_are_named():
    # Given refs just outside a read range, in another file, and on an unread line
    bad = ["pkg/a.py:9", "pkg/a.py:21", "pkg/c.py:10", "pkg/b.py:4"]
    # When / Then every bad ref is named, and the good one is not
    with pytest.raises(EvidenceChainViolation) as caught:
        evidence.check(["pkg/a.py:11", *bad], READ, "the synthesizer")
    message = str(caught.value)
    assert message.startswith("the synthesizer cited ")
    for ref in bad:
        assert repr(ref) in message
    assert "pkg/a.py:11" not in message


@pytest.mark.parametrize("ref", ["pkg/a.py", "pkg/a.py:x", "", "a b.py:3"])
def test_malformed_refs_are_violations(ref: str):
    with pytest.raises(EvidenceChainViolation, match="malformed citation"):
        evidence.check([ref], READ, "the test")


def ran(tool: str, data: dict | None, error: str | None = None) -> ToolRun:
    status = "error" if error else "success"
    return ToolRun(tool=tool, params={}, why="", status=status, error=error, data=data, citations=[])


def test_the_digest_shows_every_line_at_its_file_and_line_and_reads_back_as_it_was_found():
    # Given a definition (its docstring holding the separator), a failed call, a match, and lines read
    symbol = {"file": "pkg/a.py", "line": 10, "kind": "function", "qualname": "Ledger.post"}
    symbol |= {"signature": "def post(self, amount)", "docstring": "Add, or refuse  # at max_balance"}
    read = {"file": "pkg/a.py", "lines": [{"line": 11, "text": ""}, {"line": 12, "text": "    return 1"}]}
    runs = [
        ran("code.find_symbol", {"symbols": [symbol]}),
        ran("code.grep", None, error="bad regex"),
        ran("code.grep", {"matches": [{"file": "pkg/b.py", "line": 3, "text": "  y = 1: 2  "}]}),
        ran("code.read_lines", read),
    ]
    sections, truncated = evidence.digest(runs)
    # Then every evidence line starts with its file:line, a failure says why, and nothing was left out
    assert not truncated
    assert sections[0]["definitions"] == [
        "pkg/a.py:10: function Ledger.post: def post(self, amount)  # Add, or refuse  # at max_balance"
    ]
    assert sections[1] == {"tool": "code.grep", "params": {}, "failed": "error: bad regex"}
    # and the lines read back in order, a definition into its parts
    lines = list(evidence.read_digest(sections))
    assert [(line.kind, line.file, line.line, line.text) for line in lines[1:]] == [
        ("matches", "pkg/b.py", 3, "y = 1: 2"),
        ("code_read", "pkg/a.py", 11, ""),
        ("code_read", "pkg/a.py", 12, "    return 1"),
    ]
    definition = ("function", "Ledger.post", "def post(self, amount)", "Add, or refuse  # at max_balance")
    assert evidence.read_definition(lines[0].text) == definition
    # and a smaller budget keeps whole lines only, and says so
    cut, truncated = evidence.digest(runs, limit=len(sections[0]["definitions"][0]) + 20)
    assert truncated and cut == sections[:2]


def context(stage: str, said: BaseModel, citations: list[Citation] | None = None) -> Ctx:
    """A stage's view whose model answers `said`."""
    return Ctx(
        stage=stage,
        goal="how?",
        context={},
        answers=[],
        counters=Counters(),
        bounds=Bounds(),
        answer=None,
        think=lambda model, facts, check: said,
        tools=None,
        fan_out=lambda items: None,
        save_artifact=lambda path, content: None,
        repository_root=lambda: ".",
        citations=citations or [],
    )


def synthesize(ctx: Ctx, goal: str, earlier: Synthesis | None = None) -> Synthesis:
    return synthesizer.func(
        ctx=ctx, traverser=Traversal(goal=goal, results=[], succeeded=0, failed=0), synthesizer=earlier
    )


def critique(said: CriticOutput, goals: list[str]) -> CriticOutput:
    plan = Plan(goal=goals[0], steps=[PlanStep(tool="code.grep")], attempt=1)
    found = [Finding(claim="`x` reads it", citations=["a.py:1"])]
    synthesis = Synthesis(summary="s", goal=goals[0], stages=[], findings=found)
    return critic.func(
        ctx=context("critic", said),
        intent=IntentOutput(goals=goals),
        planner=plan,
        traverser=Traversal(goal=goals[0], results=[], succeeded=0, failed=0),
        synthesizer=synthesis,
    )


def test_synthesizer_refuses_a_citation_no_tool_returned():
    # Given evidence for pkg/a.py:10-20 only
    # and a model output citing one real line and one invented line
    said = SynthesisOutput(
        summary="s",
        findings=[
            Finding(claim="real", citations=["pkg/a.py:12"]),
            Finding(claim="made up", citations=["pkg/a.py:99"]),
        ],
    )
    # When / Then
    with pytest.raises(EvidenceChainViolation, match=r"\['pkg/a.py:99'\]"):
        synthesize(context("synthesizer", said, READ), "g")


def test_synthesizer_keeps_cited_findings_per_goal():
    earlier = Synthesis.model_validate(
        {"summary": "x", "goal": "g1", "stages": [{"goal": "g1", "summary": "x", "findings": [], "gaps": []}]}
    )
    said = SynthesisOutput(summary="s", findings=[Finding(claim="c", citations=["pkg/b.py:3"])])
    output = synthesize(context("synthesizer", said, READ), "g2", earlier)
    assert output.goal == "g2"
    assert [s.goal for s in output.stages] == ["g1", "g2"]


def test_critic_refuses_to_invent_goals():
    said = CriticOutput(decision="NEXT_STAGE", verdict="v", remaining_goals=["g2", "a new goal"])
    with pytest.raises(EvidenceChainViolation, match="the critic added goals \\['a new goal'\\]"):
        critique(said, ["g1", "g2"])


def test_critic_next_stage_without_remaining_goals_completes():
    said = CriticOutput(decision="NEXT_STAGE", verdict="v", remaining_goals=[])
    assert critique(said, ["g1"]).decision == "COMPLETE"


def test_critic_keeps_a_legitimate_next_stage():
    said = CriticOutput(decision="NEXT_STAGE", verdict="v", remaining_goals=["g2"])
    assert critique(said, ["g1", "g2"]).decision == "NEXT_STAGE"


# -- the offline intent policy -----------------------------------------------------------------


def intent(question: str) -> IntentOutput:
    return offline_policy(
        LLMRequest(
            stage="intent", role="classifier", messages=[], output_model=IntentOutput, facts={"question": question}
        )
    )


def test_two_questions_become_two_goals():
    # Given a question with two parts, each naming something searchable
    result = intent("How does EnvelopeCodec work, and where is max_agent_hops enforced?")
    # Then
    assert result.goals == ["How does EnvelopeCodec work", "where is max_agent_hops enforced"]
    assert not result.clarification_needed
    assert {"EnvelopeCodec", "max_agent_hops"} <= set(result.search_terms)


def test_a_part_with_nothing_searchable_is_not_a_goal():
    # Single letters are neither identifiers nor keywords the policy can search for
    result = intent("How does X work, and where is Y enforced?")
    assert result.goals == ["where is Y enforced"]


@pytest.mark.parametrize("question", ["help", "How does it work?", "please help"])
def test_an_unsearchable_question_asks_for_clarification(question: str):
    result = intent(question)
    assert result.clarification_needed
    assert result.clarification_question


# -- a whole mission on a small repository --------------------------------------------------------

LEDGER = '''"""Bookkeeping."""


class Ledger:
    """Keeps one balance under a ceiling."""

    def __init__(self, max_balance):
        self.max_balance = max_balance
        self.balance = 0

    def post(self, amount):
        """Add an amount, refusing to pass max_balance."""
        if self.balance + amount > self.max_balance:
            raise ValueError("over max_balance")
        self.balance += amount
        return self.balance
'''
RULES = """def check_limit(balance, max_balance) -> bool:
    return balance <= max_balance
"""
DEFINITION = re.compile(
    r"^`(?P<qualname>[^`]+)` is a (?:function|method|class|interface|type) defined at \S+ as `(?P<signature>[^`]+)`"
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "ledger.py").write_text(LEDGER)
    (tmp_path / "pkg" / "rules.py").write_text(RULES)
    (tmp_path / "README.md").write_text("# ledger\n")
    return tmp_path


def check_claims_against_the_files(repo: Path, findings: list[dict]) -> int:
    """Every claim's quoted text is on the line it cites; returns how many claims were checked."""
    checked = 0
    for finding in findings:
        for ref in finding["citations"]:
            file, line = evidence.parse(ref)
            text = (repo / file).read_text().split("\n")[line - 1]
            definition = DEFINITION.match(finding["claim"])
            if definition:
                assert text.strip().startswith(("def ", "class ", "async def ")), (ref, text)
                assert definition["signature"] in text, (finding["claim"], text)
                assert definition["qualname"].split(".")[-1] in text
            else:
                quoted = re.findall(r"`([^`]+)`", finding["claim"])
                assert quoted, finding["claim"]
                for piece in quoted:
                    assert piece in text, (finding["claim"], ref, text)
            checked += 1
    return checked


def test_a_mission_answers_with_citations_that_point_at_real_lines(repo: Path):
    # Given a small repository and a two-part question
    driver = DirectDriver(CAPABILITY)
    # When
    env = driver.run("How does `Ledger` work, and where is max_balance enforced?", context={"repo": str(repo)})
    # Then the mission completed within its bounds
    assert env.terminal_reason == "completed"
    assert driver.history(env)[-1].stage == "integration"
    assert env.counters.agent_hops <= env.bounds.max_agent_hops
    result = env.outputs["integration"]
    assert result["goals"] == ["How does `Ledger` work", "where is max_balance enforced"]
    assert not result["partial"]
    # and every finding cites evidence some tool returned ...
    assert result["findings"] and result["citations"]
    evidence.check(result["citations"], env.citations, "the answer")
    # ... saying what the cited line really says
    assert check_claims_against_the_files(repo, result["findings"]) >= 2
    cited_files = {evidence.parse(ref)[0] for ref in result["citations"]}
    assert "pkg/ledger.py" in cited_files
    assert "[pkg/ledger.py:" in result["answer"]
    # and the second goal is answered by a line that really uses max_balance
    lines = {
        ref: (repo / evidence.parse(ref)[0]).read_text().split("\n")[evidence.parse(ref)[1] - 1]
        for ref in result["citations"]
    }
    assert any("max_balance" in text and not text.strip().startswith("def ") for text in lines.values())


def test_a_vague_question_is_clarified_then_answered(repo: Path):
    # Given a question the intent stage cannot search
    driver = DirectDriver(CAPABILITY)
    # When the human clarifies
    env = driver.run("help", context={"repo": str(repo)}, answers=[{"text": "where is max_balance checked?"}])
    # Then the mission resumed at intent and answered the clarified question
    assert [r.stage for r in driver.history(env)][:4] == ["perception", "intent", "intent", "planner"]
    assert driver.history(env)[1].status == "interrupted"
    assert env.terminal_reason == "completed"
    assert env.outputs["integration"]["findings"]
    check_claims_against_the_files(repo, env.outputs["integration"]["findings"])


def test_a_missing_repository_cannot_start(tmp_path: Path):
    from missions.core.errors import MissionRequestError

    with pytest.raises(MissionRequestError, match="is not a directory"):
        DirectDriver(CAPABILITY).run("where is x?", context={"repo": str(tmp_path / "nope")})


# -- the guarded stages: what the model answers is checked before the mission goes on ----------------

ONE_GOAL = "How does `Ledger` work?"
TWO_GOALS = "How does `Ledger` work, and where is max_balance enforced?"


class Steered:
    """The offline model, with the answers of some stages changed by the test (by stage name)."""

    name = "steered"

    def __init__(self, **changes: Callable[[Any], Any]):
        self._offline = ScriptedProvider(CAPABILITY.offline_policy)
        self._changes = changes

    def complete(self, request: LLMRequest) -> LLMResult:
        result = self._offline.complete(request)
        change = self._changes.get(request.stage)
        return result if change is None else dataclasses.replace(result, output=change(result.output))


def run(repo: Path, question: str, **changes: Callable[[Any], Any]) -> tuple[DirectDriver, Envelope]:
    driver = DirectDriver(CAPABILITY, llm=Steered(**changes))
    return driver, driver.run(question, context={"repo": str(repo)})


def test_the_synthesizer_refuses_a_citation_no_tool_returned(repo: Path):
    # Given a model whose synthesis cites the lines the tools returned, and one line no tool returned
    def invent(synthesis: Any) -> Any:
        assert synthesis.findings  # the real ones
        made_up = Finding(claim="made up", citations=["pkg/ledger.py:99"])
        return synthesis.model_copy(update={"findings": [*synthesis.findings, made_up]})

    # When the mission runs
    _, env = run(repo, ONE_GOAL, synthesizer=invent)
    # Then the synthesizer failed on the invented line alone, each time it was asked (its answer and the two
    # repairs), and the mission ended through finalize
    assert env.terminal_reason == "stage_failed:synthesizer"
    errors = [e for e in env.errors if e.stage == "synthesizer"][1:]  # after why no repair followed
    assert [e.kind for e in errors] == ["EvidenceChainViolation"] * 3
    assert all(re.search(r"\['pkg/ledger.py:99'\]", e.message) for e in errors), errors


def first_time(change: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`change` on the stage's first answer only: a model that gets it right when told what was wrong."""
    calls: list[Any] = []

    def changed(output: Any) -> Any:
        calls.append(output)
        return change(output) if len(calls) == 1 else output

    return changed


def test_a_malformed_citation_is_repaired_by_asking_the_synthesizer_again(repo: Path):
    # Given a synthesizer citing a tool's name instead of a line the first time (as a 270M model did)
    def cite_a_tool(synthesis: Any) -> Any:
        return synthesis.model_copy(update={"findings": [Finding(claim="listed", citations=["open_files"])]})

    driver, env = run(repo, ONE_GOAL, synthesizer=first_time(cite_a_tool))
    # Then it was asked again, and the mission completed with citations every tool returned
    assert env.terminal_reason == "completed"
    [error] = [e for e in env.errors if e.stage == "synthesizer"]
    assert error.kind == "EvidenceChainViolation" and "malformed citation 'open_files'" in error.message
    evidence.check(env.outputs["integration"]["citations"], env.citations, "the answer")
    # and the repair was one more model call of the synthesizer's stage
    synthesizer_calls = [r.llm_calls for r in driver.history(env) if r.stage == "synthesizer"]
    assert synthesizer_calls == [2]


def test_a_plan_calling_a_tool_with_invalid_parameters_is_repaired_before_it_runs(repo: Path):
    # Given a planner whose first plan calls a tool that does not exist and one without its parameters
    def bad_calls(plan: Any) -> Any:
        return plan.model_copy(update={"steps": [PlanStep(tool="code.open_files"), PlanStep(tool="code.grep")]})

    driver, env = run(repo, ONE_GOAL, planner=first_time(bad_calls))
    # Then the planner was told which step was wrong and why, and the mission completed on its second plan
    assert env.terminal_reason == "completed"
    [error] = [e for e in env.errors if e.stage == "planner"]
    assert error.kind == "InvalidAnswer"
    assert (
        "step 1: no tool 'code.open_files'" in error.message and "step 2 (code.grep): invalid params" in error.message
    )
    assert not [r for r in env.outputs["traverser"]["results"] if r["tool"] == "code.open_files"]


def goal_sections(answer: str) -> dict[str, str]:
    """The answer's numbered sections, by goal: each goal's summary and cited findings."""
    blocks = re.split(r"^\d+\. ", answer, flags=re.M)[1:]
    return {block.splitlines()[0]: block for block in blocks}


def test_the_synthesizer_keeps_cited_findings_per_goal(repo: Path):
    # When a two-goal question is answered goal by goal
    _, env = run(repo, TWO_GOALS)
    # Then the findings of the first goal survived the second goal's synthesis: the answer holds both
    # goals in order, each with findings citing what the tools returned
    assert env.terminal_reason == "completed"
    sections = goal_sections(env.outputs["integration"]["answer"])
    assert list(sections) == ["How does `Ledger` work", "where is max_balance enforced"]
    for goal, section in sections.items():
        assert re.search(r"^   - .+ \[pkg/\w+\.py:\d+\]$", section, re.M), (goal, section)
    assert "[pkg/ledger.py:4]" in sections["How does `Ledger` work"]  # class Ledger
    evidence.check(env.outputs["integration"]["citations"], env.citations, "the answer")


def test_the_critic_refuses_to_invent_goals(repo: Path):
    # Given a critic that adds a goal the intent stage never found
    def add_a_goal(verdict: Any) -> Any:
        return verdict.model_copy(
            update={"decision": "NEXT_STAGE", "remaining_goals": [*verdict.remaining_goals, "a new goal"]}
        )

    # When the mission runs
    _, env = run(repo, ONE_GOAL, critic=add_a_goal)
    # Then the critic's stage failed (asked again twice, adding it each time), and the mission ended through finalize
    assert env.terminal_reason == "stage_failed:critic"
    errors = [e for e in env.errors if e.stage == "critic"][1:]  # after why no repair followed
    assert [e.kind for e in errors] == ["EvidenceChainViolation"] * 3
    assert all("the critic added goals ['a new goal']" in e.message for e in errors)


def test_a_critics_next_stage_without_remaining_goals_completes(repo: Path):
    # Given a critic saying NEXT_STAGE with no goal left
    def next_stage(verdict: Any) -> Any:
        return verdict.model_copy(update={"decision": "NEXT_STAGE", "remaining_goals": []})

    # When the mission runs
    driver, env = run(repo, ONE_GOAL, critic=next_stage)
    # Then the decision became COMPLETE: one round, then the answer (not a loop back to the planner)
    assert env.outputs["critic"]["decision"] == "COMPLETE"
    assert [r.stage for r in driver.history(env)][-2:] == ["critic", "integration"]
    assert [r.stage for r in driver.history(env)].count("planner") == 1
    assert env.terminal_reason == "completed"


def test_a_critics_legitimate_next_stage_is_kept(repo: Path):
    # Given a two-goal question, and a critic saying NEXT_STAGE after the first goal, the second remaining
    second = "where is max_balance enforced"

    def next_stage(verdict: Any) -> Any:
        if second not in verdict.remaining_goals:  # the second round's verdict stands
            return verdict
        return verdict.model_copy(update={"decision": "NEXT_STAGE", "remaining_goals": [second]})

    # When the mission runs
    driver, env = run(repo, TWO_GOALS, critic=next_stage)
    # Then after the first critic the mission went back to the planner for the second goal
    after_critic = [state for c, state in states(driver.stores.checkpoints, env.mission_id) if c.stage == "critic"]
    first = driver.codec.decode(after_critic[0])
    assert first.output("critic")["decision"] == "NEXT_STAGE" and first.next_stage == "planner"
    assert [r.stage for r in driver.history(env)].count("planner") == 2
    assert env.terminal_reason == "completed"
    assert second in goal_sections(env.outputs["integration"]["answer"])
