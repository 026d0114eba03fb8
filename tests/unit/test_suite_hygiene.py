"""The suite's own hygiene: a test whose every assertion sits in a loop passes when the loop is empty.

Such a test must also check, outside the loop, that there was something to check (`assert items` before
the loop, or a count after it). A loop over a literal (`for kind in ("a", "b")`) cannot be empty, and a
property test's loop runs over its generated input, where an empty one is a case the property covers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
LOOPS = (ast.For, ast.AsyncFor)
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _never_empty(iterable: ast.expr) -> bool:
    """A literal with elements, or range/enumerate/zip/sorted of such literals."""
    if isinstance(iterable, ast.Tuple | ast.List | ast.Set):
        return bool(iterable.elts)
    if isinstance(iterable, ast.Dict):
        return bool(iterable.keys)
    if isinstance(iterable, ast.Constant):
        return bool(iterable.value)
    if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.args:
        if iterable.func.id == "range" and all(isinstance(a, ast.Constant) for a in iterable.args):
            return len(range(*(a.value for a in iterable.args if isinstance(a, ast.Constant)))) > 0
        if iterable.func.id in ("enumerate", "zip", "sorted", "reversed", "list", "tuple"):
            return all(_never_empty(a) for a in iterable.args)
    return False


def _is_check(node: ast.AST) -> bool:
    """An `assert`, or a `with pytest.raises(...)`."""
    if isinstance(node, ast.Assert):
        return True
    if isinstance(node, ast.With | ast.AsyncWith):
        for item in node.items:
            call = item.context_expr
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "raises":
                return True
    return False


def _checks(node: ast.AST, in_loop: bool = False) -> Iterator[bool]:
    """For each check in a test's own body: whether it sits in a loop that may run zero times."""
    for field, value in ast.iter_fields(node):
        inside = in_loop or (
            isinstance(node, LOOPS) and field == "body" and not _never_empty(node.iter)  # type: ignore[attr-defined]
        )
        for child in value if isinstance(value, list) else [value]:
            if not isinstance(child, ast.AST) or isinstance(child, SCOPES):
                continue
            if _is_check(child):
                yield inside
            yield from _checks(child, inside)


def _property_test(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    def name(decorator: ast.expr) -> str:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")

    return any(name(d) == "given" for d in function.decorator_list)


def _vacuous_tests(root: Path = TESTS) -> list[str]:
    """`path:line:name` of every test whose checks all sit in loops, with none that the loop ran."""
    found = []
    for path in sorted(root.rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or not node.name.startswith("test"):
                continue
            in_loops = list(_checks(node))
            if in_loops and all(in_loops) and not _property_test(node):
                found.append(f"{path.relative_to(root.parent)}:{node.lineno}:{node.name}")
    return found


def test_every_test_whose_asserts_sit_in_loops_checks_that_the_loop_ran():
    # Given every test function of the suite
    # Then none keeps all its assertions in loops that may run zero times without checking they ran
    found = _vacuous_tests()
    assert found == [], "assert the iterable is not empty before the loop in:\n" + "\n".join(found)


def test_the_check_finds_a_vacuous_loop_and_accepts_a_guarded_one(tmp_path: Path):
    # Given a test whose only assert is in a loop over a fixture's items, a guarded copy, and a literal loop
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_sample.py").write_text(
        "def test_vacuous(items):\n    for item in items:\n        assert item\n\n"
        "def test_guarded(items):\n    assert items\n    for item in items:\n        assert item\n\n"
        "def test_literal():\n    for item in (1, 2):\n        assert item\n\n"
        "def test_raises(items):\n    for item in items:\n        assert item\n"
        "    with pytest.raises(ValueError):\n        int('x')\n"
    )
    # Then only the vacuous one is reported
    assert _vacuous_tests(tmp_path / "tests") == ["tests/test_sample.py:1:test_vacuous"]
