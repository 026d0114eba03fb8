"""The code-QA bench's questions and scores (bench/code_qa.py), on a ground truth made by hand."""

from __future__ import annotations

import pytest

from bench.code_qa import CallGraph, Question, cited_lines, false_gaps, make_questions, score
from bench.code_qa_truth import Call, Definition, GroundTruth

# pkg/a.py: main (1-10) calls helper at 3 and parse at 4; helper (12-20) calls parse at 15; parse (22-30);
# tests/test_a.py: test_main (1-5) calls main at 2; `get` is defined twice, and `load` is a name Python's
# own modules define too
MAIN = Definition("main", "main", "function", "pkg/a.py", 1, 10)
HELPER = Definition("helper", "helper", "function", "pkg/a.py", 12, 20)
PARSE = Definition("parse_config", "parse_config", "function", "pkg/a.py", 22, 30)
TEST = Definition("test_main", "test_main", "function", "tests/test_a.py", 1, 5)
GETS = [Definition("get", "A.get", "method", "pkg/b.py", 1, 3), Definition("get", "B.get", "method", "pkg/b.py", 5, 8)]
LOAD = Definition("load", "load", "function", "pkg/b.py", 10, 12)
TRUTH = GroundTruth(
    parser="by hand",
    definitions=[MAIN, HELPER, PARSE, TEST, *GETS, LOAD],
    calls=[
        Call("helper", "pkg/a.py", 3, MAIN.id),
        Call("parse_config", "pkg/a.py", 4, MAIN.id),
        Call("parse_config", "pkg/a.py", 15, HELPER.id),
        Call("main", "tests/test_a.py", 2, TEST.id),
        Call("load", "pkg/a.py", 16, HELPER.id),
    ],
    outside=frozenset({"load"}),
)


def question(kind: str, target: str) -> Question:
    [found] = [q for q in make_questions(TRUTH, per_kind=100) if q.kind == kind and q.target == target]
    return found


def test_questions_are_asked_about_unique_names_of_the_packages_own_code():
    # Given the hand-made ground truth
    # When every question it allows is drawn
    asked = {(q.kind, q.target) for q in make_questions(TRUTH, per_kind=100)}
    # Then definitions are asked for unique names outside the tests (not `get`, defined twice, nor test_main)
    assert {t for k, t in asked if k == "definition"} == {"main", "helper", "parse_config", "load"}
    # and callers for functions with call sites, never for a name Python's own modules define (`load`)
    assert {t for k, t in asked if k == "callers"} == {"main", "helper", "parse_config"}
    # and the one path of two calls or more: main -> helper -> load is not one (load is not the package's alone)
    assert {t for k, t in asked if k == "path"} == set()


def test_the_same_seed_draws_the_same_questions():
    # Given two draws with one seed and a draw with another
    first, again = make_questions(TRUTH, per_kind=2, seed=7), make_questions(TRUTH, per_kind=2, seed=7)
    # Then the draws with one seed are the same
    assert first == again


def test_a_definition_is_found_by_any_citation_inside_its_span():
    # Given "Where is helper defined?"
    asked = question("definition", "helper")
    # Then a citation in its span is right, wherever it is among the citations; lines around it are not
    assert score(asked, ["pkg/a.py:3", "[pkg/a.py:12]"])
    assert score(asked, ["pkg/a.py:20"])
    assert not score(asked, ["pkg/a.py:11", "pkg/a.py:21", "pkg/b.py:12"])
    assert not score(asked, [])


def test_callers_must_cite_a_call_site_and_nothing_beside_the_point():
    # Given "Who calls parse_config?" (called at pkg/a.py:4 and 15)
    asked = question("callers", "parse_config")
    # Then a call site, with the definition itself, is right
    assert score(asked, ["pkg/a.py:15"])
    assert score(asked, ["pkg/a.py:4", "pkg/a.py:15", "pkg/a.py:22"])
    # but the definition alone is not, nor a call site beside an unrelated line (the call to helper)
    assert not score(asked, ["pkg/a.py:22"])
    assert not score(asked, ["pkg/a.py:4", "pkg/a.py:3"])


def test_a_path_is_right_when_a_citation_is_a_call_on_a_path_from_a_to_b():
    # Given a ground truth where main reaches parse_config through helper, and directly
    graph = CallGraph(TRUTH, strict=False)
    sites = graph.path_sites(MAIN.id, PARSE.id)
    asked = Question("path", "How does main reach parse_config?", "main -> parse_config", sites=sites)
    # When / Then the calls on a path are main's calls of helper and parse_config and helper's of parse_config
    assert sites == {("pkg/a.py", 3), ("pkg/a.py", 4), ("pkg/a.py", 15)}
    assert score(asked, ["pkg/a.py:1", "pkg/a.py:15"])
    # and a call off every path (helper calling load) is not one
    assert not score(asked, ["pkg/a.py:16", "pkg/a.py:22"])


def test_strict_graph_links_only_calls_to_names_defined_once_and_only_in_the_package():
    # Given main -> helper -> load, where `load` is also a name Python's standard modules define
    strict, loose = CallGraph(TRUTH, strict=True), CallGraph(TRUTH, strict=False)
    # Then questions are drawn without the load edge, answers are scored with it
    assert LOAD.id not in strict.edges[HELPER.id]
    assert LOAD.id in loose.edges[HELPER.id]


@pytest.mark.parametrize(
    ("refs", "lines"),
    [
        (["a.py:3", "[b/c.go:40]", "d.ts:5-9"], [("a.py", 3), ("b/c.go", 40), ("d.ts", 5)]),
        (["a.py", "no citation", "a.py:x"], []),
    ],
)
def test_citations_are_read_as_file_and_line(refs: list[str], lines: list[tuple[str, int]]):
    assert cited_lines(refs) == lines


def test_a_gap_is_false_when_its_term_is_in_the_package_text():
    # Given an answer with two gaps, one of whose terms the package holds (in another case)
    answer = "\n".join(
        ["1. Who calls parse_config", *(f"   (gap: nothing found for '{t}')" for t in ("parse_config", "zebra"))]
    )
    text = "def parse_config(path):\n".lower()
    # When / Then only the first is false
    assert false_gaps(answer, text) == ["parse_config"]
    assert false_gaps(answer.replace("parse_config'", "Parse_Config'"), text) == ["Parse_Config"]
