"""code_analysis: the evidence chain, its guarded stages, the offline policy, and a whole mission."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from capabilities.code_analysis import evidence
from capabilities.code_analysis.models import CriticOutput, Finding, IntentOutput, SynthesisOutput
from capabilities.code_analysis.policy import offline_policy
from capabilities.code_analysis.stages import Critic, Synthesizer
from missions.core import capability as registry
from missions.core.capability import EvidenceChainViolation, StageContext
from missions.core.envelope import Citation, Envelope
from missions.core.llm import LLMRequest
from tests.support.driver import DirectDriver

CAPABILITY = registry.load("code_analysis")  # built from capability.toml + the package's hooks
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


def context(stage: str, **envelope_fields) -> StageContext:
    envelope = Envelope(capability="code_analysis", raw_input="how?", **envelope_fields)
    return StageContext(envelope, PIPELINE.agent(stage), PIPELINE)


def test_synthesizer_refuses_a_citation_no_tool_returned():
    # Given evidence for pkg/a.py:10-20 only
    ctx = context("synthesizer", citations=READ, outputs={"traverser": {"goal": "g"}})
    # and a model output citing one real line and one invented line
    ctx.llm_output = SynthesisOutput(
        summary="s",
        findings=[
            Finding(claim="real", citations=["pkg/a.py:12"]),
            Finding(claim="made up", citations=["pkg/a.py:99"]),
        ],
    )
    # When / Then
    with pytest.raises(EvidenceChainViolation, match=r"\['pkg/a.py:99'\]"):
        Synthesizer().post(ctx)


def test_synthesizer_keeps_cited_findings_per_goal():
    ctx = context(
        "synthesizer",
        citations=READ,
        outputs={
            "traverser": {"goal": "g2"},
            "synthesizer": {"stages": [{"goal": "g1", "summary": "x", "findings": [], "gaps": []}]},
        },
    )
    ctx.llm_output = SynthesisOutput(summary="s", findings=[Finding(claim="c", citations=["pkg/b.py:3"])])
    output = Synthesizer().post(ctx)
    assert output["goal"] == "g2"
    assert [s["goal"] for s in output["stages"]] == ["g1", "g2"]


def test_critic_refuses_to_invent_goals():
    ctx = context("critic", outputs={"intent": {"goals": ["g1", "g2"]}})
    ctx.llm_output = CriticOutput(decision="NEXT_STAGE", verdict="v", remaining_goals=["g2", "a new goal"])
    with pytest.raises(EvidenceChainViolation, match="the critic added goals \\['a new goal'\\]"):
        Critic().post(ctx)


def test_critic_next_stage_without_remaining_goals_completes():
    ctx = context("critic", outputs={"intent": {"goals": ["g1"]}})
    ctx.llm_output = CriticOutput(decision="NEXT_STAGE", verdict="v", remaining_goals=[])
    assert Critic().post(ctx)["decision"] == "COMPLETE"


def test_critic_keeps_a_legitimate_next_stage():
    ctx = context("critic", outputs={"intent": {"goals": ["g1", "g2"]}})
    ctx.llm_output = CriticOutput(decision="NEXT_STAGE", verdict="v", remaining_goals=["g2"])
    assert Critic().post(ctx)["decision"] == "NEXT_STAGE"


# -- the offline intent policy -----------------------------------------------------------------


def intent(question: str) -> IntentOutput:
    envelope = Envelope(capability="code_analysis", raw_input=question)
    return offline_policy(
        LLMRequest(stage="intent", role="classifier", messages=[], output_model=IntentOutput, envelope=envelope)
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
DEFINITION = re.compile(r"^`(?P<qualname>[^`]+)` is a (?:function|class) defined as `(?P<signature>[^`]+)`")


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
    assert env.history[-1].stage == "integration"
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
    assert [r.stage for r in env.history][:4] == ["perception", "intent", "intent", "planner"]
    assert env.history[1].status == "interrupted"
    assert env.terminal_reason == "completed"
    assert env.outputs["integration"]["findings"]
    check_claims_against_the_files(repo, env.outputs["integration"]["findings"])


def test_a_missing_repository_cannot_start(tmp_path: Path):
    from missions.core.errors import MissionRequestError

    with pytest.raises(MissionRequestError, match="is not a directory"):
        DirectDriver(CAPABILITY).run("where is x?", context={"repo": str(tmp_path / "nope")})
