"""The one mechanism that installs and removes every patch of moto, each declared once as a `Patch`.

moto is pinned exactly, and a patch replaces one of its internals: an upgrade that renames, moves or
re-signs one must fail at install, naming the patch, instead of the emulation silently running moto's
own code (or none). So before it replaces anything, `PatchSet.install` checks each target is still
there in the shape the patch was written for: the same kind of attribute (a method, a classmethod, a
staticmethod, a property), taking the parameters the replacement takes, by the same names; and a
patch that adds what moto lacks refuses once moto has it (the patch may be able to go). A refusal
undoes what was installed before it. `uninstall` puts back exactly what was there: moto's own object
where the owner held one, nothing where the owner inherited it or lacked it.

Two things keep a process that starts the emulation from loading what it never uses. A patch `on_import`
is applied when its owner's module is first imported, not at install (moto's CloudFormation imports
every service's models, and only a deploy uses it): the same checks then fail that import, naming the
patch. A `LazyInit` package runs its `__init__` only when one of its own attributes is asked for, so a
light submodule of it imports without the models that `__init__` re-exports.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
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
    original at each install, and what it returns is installed (a cache made afresh each time).
    `on_import`: applied when the owner's module is first imported (at install if it already was)."""

    owner: str
    attribute: str
    replacement: Any
    reason: str
    adds: bool = False
    wraps: bool = False
    on_import: bool = False

    @property
    def module(self) -> str:
        return self.owner.partition(":")[0]

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


@dataclass(frozen=True, eq=False)
class LazyInit:
    """A package of moto whose `__init__` only re-exports what its models define: while the patches are
    installed, importing it (or a submodule of it) does not run that `__init__`; asking the package for
    an attribute of its own does, once. If it was imported before install, it stays as it is."""

    package: str
    reason: str

    def __str__(self) -> str:
        return self.package


class _LazyPackage:
    """The package module, its `__init__` not run yet: the module's `__getattr__` (PEP 562) runs it."""

    def __init__(self, package: str) -> None:
        spec = importlib.util.find_spec(package)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            raise PatchRefused(f"cannot defer {package}'s __init__: moto has no such package any more")
        self.spec, self.loader = spec, spec.loader
        self.module = importlib.util.module_from_spec(spec)
        self.ran = False
        self._lock = threading.RLock()
        self.module.__getattr__ = self._attribute  # type: ignore[method-assign]

    def _attribute(self, name: str) -> Any:
        with self._lock:  # another thread asking meanwhile waits for the __init__ to have run
            if not self.ran:
                self.ran = True
                try:
                    self.loader.exec_module(self.module)
                finally:
                    if vars(self.module).get("__getattr__") == self._attribute:  # not one its __init__ made
                        del self.module.__getattr__
        if name in vars(self.module):
            return vars(self.module)[name]
        raise AttributeError(f"module {self.spec.name!r} has no attribute {name!r}")


class _LoadThen(importlib.abc.Loader):
    """A module's own loader, then `then` once its code ran (the module's loader is its own again after)."""

    def __init__(self, loader: importlib.abc.Loader, then: Callable[[], None]) -> None:
        self._loader, self._then = loader, then

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        self._then()


class _OnImport(importlib.abc.MetaPathFinder):
    """Finds the modules some patches wait for as the path finder does, and applies those patches once
    each module's code ran: a patch refused there fails that import."""

    def __init__(self, waiting: dict[str, list[Patch]], apply: Callable[[str], None]) -> None:
        self._waiting, self._apply = waiting, apply

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self._waiting:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _LoadThen(spec.loader, lambda: self._apply(fullname))
        return spec


class PatchSet:
    """Patches installed together, in their order (a patch may have to be in place before a later
    one's owner is imported), and removed together in the reverse order; the packages `lazy` names
    are deferred first."""

    def __init__(self, patches: Iterable[Patch], lazy: Iterable[LazyInit] = ()) -> None:
        self.patches = tuple(patches)
        self.lazy = tuple(lazy)
        self._applied: list[_Applied] = []
        self._installed = False
        self._lock = threading.RLock()  # a patch applied on import may be imported by an install
        self._waiting: dict[str, list[Patch]] = {}
        self._finder: _OnImport | None = None
        self._deferred: list[_LazyPackage] = []

    @property
    def installed(self) -> bool:
        return self._installed

    def install(self) -> None:
        """Apply every patch (idempotent); raise PatchRefused, with nothing applied, if one cannot be."""
        with self._lock:
            if self._installed:
                return
            try:
                for lazy in self.lazy:
                    self._defer(lazy.package)
                for patch in self.patches:
                    if patch.on_import and patch.module not in sys.modules:
                        self._waiting.setdefault(patch.module, []).append(patch)
                    else:
                        self._apply(patch)
                if self._waiting:
                    self._finder = _OnImport(self._waiting, self._imported)
                    sys.meta_path.insert(0, self._finder)
            except BaseException:
                self._restore()
                raise
            self._installed = True

    def uninstall(self) -> None:
        """Put back what every patch replaced (idempotent)."""
        with self._lock:
            self._restore()
            self._installed = False

    def _defer(self, package: str) -> None:
        if package in sys.modules:
            return  # imported already: as it is
        lazy = _LazyPackage(package)
        parent, _, name = package.rpartition(".")
        sys.modules[package] = lazy.module
        if parent:
            setattr(sys.modules[parent], name, lazy.module)
        self._deferred.append(lazy)

    def _imported(self, module: str) -> None:
        """The patches waiting for `module`, applied as its import ends; a refusal undoes them and fails it."""
        with self._lock:
            patches = self._waiting.pop(module, [])
            applied = len(self._applied)
            try:
                for patch in patches:
                    self._apply(patch)
            except BaseException:
                while len(self._applied) > applied:
                    self._undo(self._applied.pop())
                raise

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
        if self._finder is not None:
            sys.meta_path.remove(self._finder)
            self._finder = None
        self._waiting.clear()
        while self._applied:
            self._undo(self._applied.pop())
        while self._deferred:  # a package whose __init__ never ran is forgotten: imported again, it runs
            lazy = self._deferred.pop()
            if not lazy.ran and sys.modules.get(lazy.spec.name) is lazy.module:
                del sys.modules[lazy.spec.name]
                parent, _, name = lazy.spec.name.rpartition(".")
                if parent and getattr(sys.modules.get(parent), name, None) is lazy.module:
                    delattr(sys.modules[parent], name)

    @staticmethod
    def _undo(applied: _Applied) -> None:
        if applied.held is _ABSENT:
            delattr(applied.owner, applied.patch.attribute)
        else:
            setattr(applied.owner, applied.patch.attribute, applied.held)
