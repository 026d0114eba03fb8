"""JavaScript, TypeScript, Go and Java, from tree-sitter's own grammars."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

from capabilities.code_analysis.index._model import MAX_LINE_CHARS, CallSite, Definition, Import, Parsed, _line_text

# -- tree-sitter languages -----------------------------------------------------------------------


@functools.cache
def _parser(language: str) -> Any:
    """tree-sitter's parser for a language, made on first use (the grammars are native modules)."""
    from tree_sitter import Language, Parser

    if language == "javascript":
        import tree_sitter_javascript as grammar

        return Parser(Language(grammar.language()))
    if language in ("typescript", "tsx"):
        import tree_sitter_typescript as ts

        return Parser(Language(ts.language_tsx() if language == "tsx" else ts.language_typescript()))
    if language == "go":
        import tree_sitter_go as go

        return Parser(Language(go.language()))
    if language == "java":
        import tree_sitter_java as java

        return Parser(Language(java.language()))
    raise ValueError(f"no grammar for {language}")


# node type -> definition kind, per grammar family
_DEFINES = {
    "javascript": {
        "function_declaration": "function",
        "generator_function_declaration": "function",
        "class_declaration": "class",
        "abstract_class_declaration": "class",
        "method_definition": "method",
        "interface_declaration": "interface",
        "type_alias_declaration": "type",
        "enum_declaration": "type",
        "function_signature": "function",
        "method_signature": "method",
        "abstract_method_signature": "method",
    },
    "go": {"function_declaration": "function", "method_declaration": "method", "type_spec": "type"},
    "java": {
        "class_declaration": "class",
        "interface_declaration": "interface",
        "enum_declaration": "class",
        "record_declaration": "class",
        "method_declaration": "method",
        "constructor_declaration": "method",
    },
}
_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function", "generator_function"})
_CALLS = frozenset({"call_expression", "new_expression", "method_invocation", "object_creation_expression"})


def _tree_sitter(language: str) -> Callable[[str, bytes], Parsed]:
    family = "javascript" if language in ("javascript", "typescript", "tsx") else language
    defines = _DEFINES[family]

    def parse(file: str, source: bytes) -> Parsed:
        tree = _parser(language).parse(source)
        lines = source.split(b"\n")
        definitions: list[Definition] = []
        calls: list[CallSite] = []
        imports: list[Import] = []

        def text(node: Any) -> str:
            return source[node.start_byte : node.end_byte].decode("utf-8", errors="replace")

        def walk(node: Any, scope: tuple[str, ...], function: Definition | None) -> None:
            for child in node.named_children:
                definition = _ts_definition(child, defines, family, scope, file, language, text, lines)
                if definition is not None:
                    definitions.append(definition)
                    inner_scope = (*scope, definition.name) if family != "go" else ()
                    is_type = definition.kind in ("class", "interface", "type")
                    walk(child, inner_scope, function if is_type else definition)
                    continue
                if child.type in _CALLS:
                    called = _ts_called(child)
                    if called is not None:
                        line = called.start_point[0] + 1  # the name's line: a chained call spans several
                        calls.append(
                            CallSite(
                                text(called),
                                file,
                                line,
                                _line_text(lines, line),
                                function.qualname if function else None,
                                function.line if function else None,
                            )
                        )
                elif child.type in ("import_statement", "import_spec", "import_declaration"):
                    imports.extend(_ts_imports(child, family, file, text))
                walk(child, scope, function)

        walk(tree.root_node, (), None)
        return definitions, calls, imports

    return parse


def _ts_definition(
    node: Any,
    defines: dict[str, str],
    family: str,
    scope: tuple[str, ...],
    file: str,
    language: str,
    text: Callable[[Any], str],
    lines: list[bytes],
) -> Definition | None:
    kind = defines.get(node.type)
    name_node = node.child_by_field_name("name")
    if kind is None and family == "javascript" and node.type == "variable_declarator":
        value = node.child_by_field_name("value")
        if value is None or value.type not in _FUNCTION_VALUES:
            return None
        kind = "function"
    if kind is None or name_node is None:
        return None
    name = text(name_node).strip("\"'#")
    if family == "go" and node.type == "type_spec":
        shape = node.child_by_field_name("type")
        kind = {"struct_type": "class", "interface_type": "interface"}.get(shape.type if shape else "", "type")
    qualname = ".".join((*scope, name))
    if family == "go" and node.type == "method_declaration":
        receiver = node.child_by_field_name("receiver")
        owner = _go_receiver(text(receiver)) if receiver is not None else ""
        qualname = f"{owner}.{name}" if owner else name
    line = node.start_point[0] + 1
    if node.type == "variable_declarator" or (family == "go" and node.type == "type_spec"):
        line = node.start_point[0] + 1
    end_line = node.end_point[0] + 1
    signature = _line_text(lines, line)
    docstring = _comment_above(lines, line)
    return Definition(name, qualname, kind, file, line, end_line, language, signature, docstring)


def _go_receiver(receiver: str) -> str:
    """`(s *Server)` -> Server; `(Server[T])` -> Server."""
    inner = receiver.strip("() ").split()[-1] if receiver.strip("() ") else ""
    return inner.lstrip("*").split("[")[0]


def _comment_above(lines: list[bytes], line: int) -> str | None:
    """The first line of the comment block just above a definition (JSDoc, Go doc, Javadoc)."""
    block: list[str] = []
    number = line - 1
    while number >= 1:
        stripped = lines[number - 1].decode("utf-8", errors="replace").strip()
        if stripped.startswith(("//", "*", "/*", "*/")) or stripped.startswith("@") and block:
            block.append(stripped)
            number -= 1
            continue
        if stripped.startswith("@"):  # a decorator or annotation between the comment and the definition
            number -= 1
            continue
        break
    for raw in reversed(block):
        cleaned = raw.lstrip("/*").removesuffix("*/").strip()
        if cleaned and not cleaned.startswith("@"):
            return cleaned[:MAX_LINE_CHARS]
    return None


def _ts_called(node: Any) -> Any | None:
    """The name node a call calls: f(), obj.f(), new F(), obj.<T>f(), Java's obj.f() and new F()."""
    if node.type == "method_invocation":
        return node.child_by_field_name("name")
    if node.type == "object_creation_expression":
        target = node.child_by_field_name("type")
    else:
        target = node.child_by_field_name("function") or node.child_by_field_name("constructor")
    while target is not None:
        if target.type in ("identifier", "type_identifier", "field_identifier", "property_identifier"):
            return target
        if target.type in ("member_expression", "selector_expression"):
            target = target.child_by_field_name("property") or target.child_by_field_name("field")
        elif target.type in ("generic_type", "scoped_type_identifier"):
            named = target.named_children
            target = named[-1] if target.type == "scoped_type_identifier" and named else (named[0] if named else None)
        elif target.type in ("parenthesized_expression", "non_null_expression"):
            target = target.named_children[0] if target.named_children else None
        else:
            return None
    return None


def _ts_imports(node: Any, family: str, file: str, text: Callable[[Any], str]) -> list[Import]:
    line = node.start_point[0] + 1
    if family == "javascript":
        source = node.child_by_field_name("source")
        if source is None:
            return []
        module = text(source).strip("\"'`")
        names = tuple(text(n) for n in _descendants(node) if n.type in ("identifier",) and n.parent.type != "string")
        return [Import(file, line, module, names, None)]
    if family == "go":
        path = node.child_by_field_name("path")
        if path is None:
            return []
        module = text(path).strip('"`')
        return [Import(file, line, module, (module.rsplit("/", 1)[-1],), None)]
    written = text(node).removeprefix("import").removesuffix(";").replace("static ", "").strip()
    return [Import(file, line, written, (written.rsplit(".", 1)[-1],), None)]


def _descendants(node: Any) -> Iterator[Any]:
    for child in node.named_children:
        yield child
        yield from _descendants(child)
