"""The one mechanism that installs and removes every patch of moto, each declared once as a `Patch`.

moto is pinned exactly, and a patch replaces one of its internals: an upgrade that renames, moves or
re-signs one must fail at install, naming the patch, instead of the emulation silently running moto's
own code (or none). So before it replaces anything, `PatchSet.install` checks each target is still
there in the shape the patch was written for: the same kind of attribute (a method, a classmethod, a
staticmethod, a property), taking the parameters the replacement takes, by the same names; and a
patch that adds what moto lacks refuses once moto has it (the patch may be able to go). A refusal
undoes what was installed before it. `uninstall` puts back exactly what was there: moto's own object
where the owner held one, nothing where the owner inherited it or lacked it.
"""

from __future__ import annotations

import importlib
import inspect
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

_ABSENT = object()  # what an owner's namespace held where it had no attribute of its own
_ORIGINALS: dict[Patch, Any] = {}  # each patch's moto original, as a caller would get it (kept after uninstall:
# a moto thread already inside a replacement may still call it)


class PatchRefused(RuntimeError):
    """moto no longer has what a patch replaces, in the shape it was written for (or now has what it adds)."""


@dataclass(frozen=True, eq=False)  # a patch is itself: compared and hashed by identity
class Patch:
    """One change to moto: on `owner` ("package.module" or "package.module:Class"), `attribute` becomes
    `replacement`, because of `reason`.

    `adds`: moto has no such attribute; the patch adds it. `wraps`: `replacement` is called with moto's
    original at each install, and what it returns is installed (a cache made afresh each time)."""

    owner: str
    attribute: str
    replacement: Any
    reason: str
    adds: bool = False
    wraps: bool = False

    @property
    def original(self) -> Any:
        """moto's own attribute this patch replaced (as `getattr` gave it: a function, not a descriptor)."""
        return _ORIGINALS[self]

    def __str__(self) -> str:
        return f"{self.owner}.{self.attribute}"


def _owner(path: str) -> Any:
    module_name, _, qualname = path.partition(":")
    owner: Any = importlib.import_module(module_name)
    for name in filter(None, qualname.split(".")):
        owner = getattr(owner, name)
    return owner


def _kind(value: Any) -> str:
    for kind in (classmethod, staticmethod, property):
        if isinstance(value, kind):
            return kind.__name__
    return "callable" if callable(value) else type(value).__name__


def _function(value: Any) -> Any:
    return value.__func__ if isinstance(value, classmethod | staticmethod) else value


_NAMED = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _signature_problem(original: Any, replacement: Any) -> str | None:
    """Why `replacement` cannot stand in for `original`, or None: it must accept every argument the
    original declares (passed by position, and by name), and name its own as the original does."""
    try:
        want = inspect.signature(_function(original))
        have = inspect.signature(_function(replacement))
    except (TypeError, ValueError):
        return None  # a builtin without a signature: the kind check is all there is
    declared = list(want.parameters.values())
    positional = [p for p in declared if p.kind in _NAMED]
    keyword_only = {p.name: None for p in declared if p.kind is inspect.Parameter.KEYWORD_ONLY}
    by_name = {p.name: None for p in positional[1:] if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD}
    first = [p for p in positional if p.kind is inspect.Parameter.POSITIONAL_ONLY or p.name not in by_name]
    try:
        have.bind(*positional, **keyword_only)
        have.bind(*first, **by_name, **keyword_only)
    except TypeError as exc:
        return f"moto's {want} is not accepted by the replacement's {have} ({exc})"
    own = [p.name for p in have.parameters.values() if p.kind in _NAMED]
    if own != [p.name for p in positional][: len(own)]:
        return f"moto's parameters {want} are not the replacement's {have}"
    unknown = [
        p.name
        for p in have.parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in want.parameters
    ]
    if unknown and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in declared):
        return f"moto's {want} has no parameter {', '.join(unknown)}"
    return None


def _refusal(patch: Patch, owner: Any, replacement: Any) -> str | None:
    try:
        found = inspect.getattr_static(owner, patch.attribute)
    except AttributeError:
        found = _ABSENT
    if patch.adds:
        return None if found is _ABSENT else "moto has it now: see whether this patch can go"
    if found is _ABSENT:
        return "moto has no such attribute any more"
    if _kind(found) != _kind(replacement):
        return f"moto's is a {_kind(found)}, the replacement a {_kind(replacement)}"
    return _signature_problem(found, replacement)


@dataclass
class _Applied:
    patch: Patch
    owner: Any
    held: Any  # what the owner's own namespace held under the attribute, or _ABSENT


class PatchSet:
    """Patches installed together, in their order (a patch may have to be in place before a later
    one's owner is imported), and removed together in the reverse order."""

    def __init__(self, patches: Iterable[Patch]) -> None:
        self.patches = tuple(patches)
        self._applied: list[_Applied] = []
        self._installed = False
        self._lock = threading.Lock()

    @property
    def installed(self) -> bool:
        return self._installed

    def install(self) -> None:
        """Apply every patch (idempotent); raise PatchRefused, with nothing applied, if one cannot be."""
        with self._lock:
            if self._installed:
                return
            try:
                for patch in self.patches:
                    self._apply(patch)
            except BaseException:
                self._restore()
                raise
            self._installed = True

    def uninstall(self) -> None:
        """Put back what every patch replaced (idempotent)."""
        with self._lock:
            self._restore()
            self._installed = False

    def _apply(self, patch: Patch) -> None:
        owner = _owner(patch.owner)
        original = None if patch.adds else getattr(owner, patch.attribute, None)
        replacement = patch.replacement(original) if patch.wraps else patch.replacement
        problem = _refusal(patch, owner, replacement)
        if problem:
            raise PatchRefused(f"cannot patch {patch} ({patch.reason}): {problem}")
        self._applied.append(_Applied(patch, owner, vars(owner).get(patch.attribute, _ABSENT)))
        if not patch.adds:
            _ORIGINALS[patch] = original
        setattr(owner, patch.attribute, replacement)

    def _restore(self) -> None:
        while self._applied:
            applied = self._applied.pop()
            if applied.held is _ABSENT:
                delattr(applied.owner, applied.patch.attribute)
            else:
                setattr(applied.owner, applied.patch.attribute, applied.held)
