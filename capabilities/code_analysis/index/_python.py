"""Python's definitions, calls and imports, from the standard library's `ast`."""

from __future__ import annotations

import ast
from pathlib import PurePosixPath

from capabilities.code_analysis.index._model import MAX_LINE_CHARS, CallSite, Definition, Import, Parsed, _line_text

# -- Python --------------------------------------------------------------------------------------


def _python(file: str, source: bytes) -> Parsed:
    tree = ast.parse(source, filename=file)
    lines = source.split(b"\n")
    definitions: list[Definition] = []
    calls: list[CallSite] = []
    imports: list[Import] = []
    package = PurePosixPath(file).parent

    def visit(node: ast.AST, scope: tuple[str, ...], function: Definition | None, in_class: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _PY_LEAVES):
                continue
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                qualname = ".".join((*scope, child.name))
                is_class = isinstance(child, ast.ClassDef)
                kind = "class" if is_class else ("method" if in_class else "function")
                doc = (ast.get_docstring(child) or "").strip()
                definition = Definition(
                    child.name,
                    qualname,
                    kind,
                    file,
                    child.lineno,
                    child.end_lineno or child.lineno,
                    "python",
                    _python_signature(child),
                    doc.splitlines()[0][:MAX_LINE_CHARS] if doc else None,
                )
                definitions.append(definition)
                for decorator in child.decorator_list:  # evaluated where the definition stands
                    visit_node(decorator, scope, function, in_class)
                evaluated: list[ast.expr | None] = (
                    list(child.bases)
                    if isinstance(child, ast.ClassDef)
                    else [*child.args.defaults, *child.args.kw_defaults]
                )
                for default in evaluated:  # bases and default values run where the definition stands
                    if default is not None:
                        visit_node(default, scope, function, in_class)
                for statement in child.body:
                    visit_node(statement, (*scope, child.name), function if is_class else definition, is_class)
                continue
            if isinstance(child, ast.Call):
                called = _python_called(child.func)
                if called:
                    calls.append(
                        CallSite(
                            called,
                            file,
                            child.lineno,
                            _line_text(lines, child.lineno),
                            function.qualname if function else None,
                            function.line if function else None,
                        )
                    )
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    imports.append(Import(file, child.lineno, alias.name, (alias.asname or alias.name,), None))
            elif isinstance(child, ast.ImportFrom):
                base = package
                for _ in range(max(child.level - 1, 0)):
                    base = base.parent
                module = child.module or ""
                written = ("." * child.level) + module
                target = f"{base.as_posix()}/{module.replace('.', '/')}" if child.level else module
                names = tuple(a.name for a in child.names)
                imports.append(Import(file, child.lineno, written, names, target if child.level else None))
            visit(child, scope, function, in_class)

    def visit_node(node: ast.AST, scope: tuple[str, ...], function: Definition | None, in_class: bool) -> None:
        holder = ast.Module(body=[node], type_ignores=[])  # type: ignore[list-item]  # so the node is a child
        visit(holder, scope, function, in_class)

    visit(tree, (), None, False)
    return definitions, calls, imports


# nodes that hold no call and no definition: not descended into (most of a tree's nodes)
_PY_LEAVES = (
    ast.Name,
    ast.Constant,
    ast.expr_context,
    ast.operator,
    ast.unaryop,
    ast.cmpop,
    ast.boolop,
    ast.alias,
    ast.Pass,
)


def _python_called(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _python_signature(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
    if isinstance(node, ast.ClassDef):
        bases = [ast.unparse(b) for b in node.bases] + [ast.unparse(k) for k in node.keywords]
        return f"class {node.name}({', '.join(bases)})" if bases else f"class {node.name}"
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
    return f"{prefix} {node.name}({ast.unparse(node.args)}){returns}"[:MAX_LINE_CHARS]
