"""Question-aware planning and a critic that rejects beside-the-point evidence: what a question asks
decides the tools, the evidence that counts, and when a gap may say something is not there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capabilities.code_analysis.models import (
    CriticOutput,
    Finding,
    IntentOutput,
    Plan,
    PlanOutput,
    PlanStep,
    Synthesis,
    SynthesisOutput,
    ToolRun,
    Traversal,
)
from capabilities.code_analysis.policy import offline_policy
from capabilities.code_analysis.questions import STOPWORDS, classify
from capabilities.code_analysis.stages import critic, synthesizer
from missions.core.capability import registry as registry
from missions.core.llm.provider import LLMRequest
from missions.core.mission.envelope import Citation
from tests.support.driver import DirectDriver
from tests.unit.capabilities.test_code_analysis import context
from tests.unit.capabilities.test_code_index import PY_SHOP, PY_TAX, TS, write

CAPABILITY = registry.load("code_analysis")


@pytest.mark.parametrize(
    ("question", "kind", "subjects"),
    [
        ("Where is compute_tax defined?", "definition", ["compute_tax"]),
        ("Where is toFile defined?", "definition", ["toFile"]),
        ("Who calls compute_tax?", "callers", ["compute_tax"]),
        ("Which functions call parse_args?", "callers", ["parse_args"]),
        ("Where is _api_call used?", "callers", ["_api_call"]),
        ("What does EnvelopeCodec.encode do?", "explain", ["EnvelopeCodec.encode"]),
        ("How does handle_stage reach compile_mission?", "path", ["handle_stage", "compile_mission"]),
        ("Where is the MISSIONS_TABLE environment variable read?", "setting", ["MISSIONS_TABLE"]),
        ("What handles the push event?", "event", []),
        ("where is max_agent_hops enforced", "search", ["max_agent_hops"]),
    ],
)
def test_a_question_is_classified_by_what_it_asks(question: str, kind: str, subjects: list[str]):
    asked = classify(question)
    assert (asked.kind, asked.subjects) == (kind, subjects)


QUESTION_WORDS = sorted({"where", "who", "call", "calls", "called", "does", "how", "what", "which", "is", "defined"})


@given(
    st.lists(st.sampled_from(QUESTION_WORDS), min_size=1, max_size=6),
    st.sampled_from(["compute_tax", "toFile", "ExecuteC", "max_agent_hops"]),
)
def test_question_words_are_never_search_terms(words: list[str], symbol: str):
    # For any question made of question words around one symbol
    asked = classify(" ".join([*words, symbol]) + "?")
    # the symbol is what is searched for, and no question or stop word is
    assert symbol in asked.subjects
    assert not {t.lower() for t in [*asked.subjects, *asked.terms]} & STOPWORDS


def test_words_are_searched_as_stems():
    assert classify("where is max_agent_hops enforced").terms == ["enforc"]


def plan(goal: str, attempt: int = 1) -> PlanOutput:
    request = LLMRequest(
        stage="planner",
        role="planner",
        messages=[],
        output_model=PlanOutput,
        facts={"current_goal": goal, "attempt": attempt},
    )
    return offline_policy(request)  # type: ignore[no-any-return]


def test_who_calls_is_planned_as_call_sites_not_a_search_for_the_word_call():
    steps = plan("Who calls compute_tax?").steps
    assert [(s.tool, s.params) for s in steps] == [
        ("code.find_callers", {"name": "compute_tax"}),
        ("code.find_symbol", {"name": "compute_tax"}),
    ]
    assert not any("call" in str(s.params.get("pattern", "")).lower() for s in steps)


def test_a_path_is_planned_over_the_call_graph_and_broadened_on_a_second_attempt():
    first = plan("How does receipt reach compute_tax?")
    assert first.steps[0].tool == "code.call_path" and first.steps[0].params["max_depth"] == 4
    second = plan("How does receipt reach compute_tax?", attempt=2)
    assert second.steps[0].params["max_depth"] == 6 and "code.find_callers" in [s.tool for s in second.steps]


# -- the synthesizer and the critic keep to the point ------------------------------------------------


def ran(tool: str, data: dict) -> ToolRun:
    return ToolRun(tool=tool, params={}, why="", status="success", error=None, data=data, citations=[])


CALLERS = ran(
    "code.find_callers",
    {
        "callers": [
            {
                "file": "shop/cart.py",
                "line": 5,
                "text": "return total + compute_tax(total)",
                "calls": "compute_tax",
                "caller": "checkout",
                "caller_line": 4,
            }
        ]
    },
)
DEFINITION = ran(
    "code.find_symbol",
    {
        "symbols": [
            {
                "file": "shop/tax.py",
                "line": 1,
                "end_line": 3,
                "kind": "function",
                "name": "compute_tax",
                "qualname": "compute_tax",
                "signature": "def compute_tax(amount)",
            }
        ]
    },
)


def test_a_finding_beside_the_point_is_dropped_with_why(tmp_path: Path):
    # Given a callers question whose evidence holds a call site, and a model citing it and a line that does not call
    write(tmp_path, {"shop/tax.py": PY_TAX, "shop/cart.py": PY_SHOP})
    said = SynthesisOutput(
        summary="s",
        findings=[
            Finding(claim="checkout calls `compute_tax`", citations=["shop/cart.py:5"]),
            Finding(claim="`def receipt` is about tax", citations=["shop/cart.py:8"]),
        ],
        gaps=["nothing found for 'checkout'"],  # the repository does contain it
    )
    citations = [Citation(file="shop/cart.py", line=5), Citation(file="shop/cart.py", line=8)]
    ctx = context("synthesizer", said, citations)
    ctx._root = lambda: str(tmp_path)  # the repository the tools read
    traversal = Traversal(goal="Who calls compute_tax?", results=[CALLERS, DEFINITION], succeeded=2, failed=0)
    # When the synthesizer runs
    out = synthesizer.func(ctx=ctx, traverser=traversal, synthesizer=None)
    # Then only the caller is kept; the stray finding and the false gap are dropped, and why is recorded
    assert [f.citations for f in out.findings] == [["shop/cart.py:5"]]
    assert out.gaps == []
    assert any("shop/cart.py:8" in why for why in out.dropped) and any(
        "mentions 'checkout'" in why for why in out.dropped
    )


def test_the_critic_sends_back_a_callers_answer_that_cites_no_call():
    # Given findings for "who calls" that cite only the definition
    said = CriticOutput(decision="COMPLETE", verdict="looks fine")
    ctx = context("critic", said)
    goal = "Who calls compute_tax?"
    synthesis_findings = [Finding(claim="`compute_tax` is defined", citations=["shop/tax.py:1"])]

    out = critic.func(
        ctx=ctx,
        intent=IntentOutput(goals=[goal]),
        planner=Plan(goal=goal, steps=[PlanStep(tool="code.find_callers")], attempt=1),
        traverser=Traversal(goal=goal, results=[CALLERS, DEFINITION], succeeded=2, failed=0),
        synthesizer=Synthesis(summary="s", goal=goal, stages=[], findings=synthesis_findings),
    )
    # Then it is a REPLAN that says why, whatever the model said
    assert out.decision == "REPLAN" and "no finding cites a line that calls compute_tax" in out.verdict


# -- whole missions --------------------------------------------------------------------------------


def answer(repo: Path, question: str) -> dict:
    env = DirectDriver(CAPABILITY).run(question, context={"repo": str(repo)})
    assert env.terminal_reason == "completed"
    return env.outputs["integration"]


def test_who_calls_is_answered_by_lines_that_call_it(tmp_path: Path):
    repo = write(tmp_path, {"shop/__init__.py": "", "shop/tax.py": PY_TAX, "shop/cart.py": PY_SHOP})
    result = answer(repo, "Who calls compute_tax?")
    assert result["citations"] == ["shop/cart.py:5"]
    assert "checkout calls `compute_tax`" in result["answer"] and "(gap:" not in result["answer"]


def test_a_typescript_definition_is_found_and_no_false_gap_is_reported(tmp_path: Path):
    repo = write(tmp_path, {"src/uploads.ts": TS})
    result = answer(repo, "Where is toFile defined?")
    assert result["citations"] == ["src/uploads.ts:4"]
    assert "export async function toFile(" in result["answer"] and "(gap:" not in result["answer"]


def test_a_word_the_repository_lacks_is_a_gap_that_says_what_was_searched(tmp_path: Path):
    repo = write(tmp_path, {"shop/tax.py": PY_TAX})
    result = answer(repo, "Where is the zorblax retry policy configured?")
    gaps = re.findall(r"\(gap: (.*)\)", result["answer"])
    assert any(g.startswith("nothing found for 'zorblax': no case-insensitive match in any of the 1") for g in gaps), (
        gaps
    )
