"""Build the runtime layer: dependencies for the Lambda platform plus the production code of shared/
and capabilities/, with the bytecode of every module compiled for the runtime's Python.

The layer carries production code only. Development code is left out by where it lives, so a new
module falls under the rule by the folder it is in (`DEVELOPMENT`): in the runtime library, the
layers above the app in pyproject.toml's import contract (the CLI, the HTTP client, the local
emulation) and the web page (served by CloudFront and `missions dev`, never by a function); in a
capability, its `dev/` package (sample data, fake servers). The import contract keeps the runtime's
production code from importing its development code; tests/unit/test_layer_contents.py imports every
module of a built layer with the development code made unimportable.

pydantic-core is compiled, so wheels are chosen for the Lambda runtime's Python and
architecture, not this machine's. Usage: python layers/build.py [--arch arm64|x86_64] [--out DIR] [--sources-only]
[--provider NAME | --env NAME]

A layer carries the model SDK of one provider, its environment's (`--env` reads it from cdk.json; `--provider`
names it; default: every provider's), and none of another's: the openai and anthropic SDKs are a sixth of
the layer each. What only a left-out SDK needs is left out with it (`kept_requirements`); the stack refuses
a layer without its environment's SDK (infra/components/functions.py).

Lambda cannot write `.pyc` into /opt (read-only), so a layer without bytecode compiles every module it
imports at every cold start. The layer therefore ships `__pycache__/*.cpython-311.pyc` next to its
sources (kept: tracebacks and `inspect` read them), compiled by this interpreter, which must be the
runtime's version (bytecode is version-specific: a wrong one is ignored and compiled anew at each cold
start, so the build refuses to run under it). The pycs are unchecked-hash ones (PEP 552): the zip of
the layer keeps 2-second mtimes, so timestamp-validated pycs would look stale and be recompiled at
every cold start; the layer is rebuilt from scratch each time, so its pycs always match its sources.
They name their sources where Lambda puts them (/opt/python), not where the build ran, so the same
sources give the same layer, byte for byte, wherever it is built (its asset hash changes only with them).

`--sources-only` skips the dependencies (no network): the layer then holds only the runtime's
own code, which is enough for synth tests whose template does not depend on the contents.
"""

from __future__ import annotations

import argparse
import compileall
import py_compile
import re
import shutil
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path

from layers.elf import strip_debug_files

ROOT = Path(__file__).resolve().parents[1]
PYTHON = "3.11"  # the suite's Python; infra/components/functions.py RUNTIME must match
PLATFORMS = {"arm64": "manylinux2014_aarch64", "x86_64": "manylinux2014_x86_64"}
LAMBDA_LAYER_PATH = "/opt/python"  # where Lambda puts a layer's python/ folder (on sys.path)
LOCK = ROOT / "layers" / "requirements.lock"
EVERY_PROVIDER = "all"


# Development code, by folder: relative to shared/missions (the layer's `missions`), and the name of a
# capability's development package (capabilities/<name>/dev).
RUNTIME_DEVELOPMENT = ("cli", "cli.py", "client.py", "local", "web")
CAPABILITY_DEVELOPMENT = "dev"
NEVER_SHIPPED = ("__pycache__", "*.pyc", "tests")


def development_modules() -> tuple[str, ...]:
    """The dotted names of what the layer leaves out (`capabilities.*.dev`: every capability's)."""
    runtime = sorted({f"missions.{name.removesuffix('.py')}" for name in RUNTIME_DEVELOPMENT})
    return (*runtime, f"capabilities.*.{CAPABILITY_DEVELOPMENT}")


def _runtime_ignore(folder: str, names: list[str]) -> set[str]:
    ignored = set(shutil.ignore_patterns(*NEVER_SHIPPED)(folder, names))
    if Path(folder) == ROOT / "shared" / "missions":
        ignored |= set(RUNTIME_DEVELOPMENT) & set(names)
    return ignored


def _capabilities_ignore(folder: str, names: list[str]) -> set[str]:
    ignored = set(shutil.ignore_patterns(*NEVER_SHIPPED)(folder, names))
    if Path(folder).parent == ROOT / "capabilities" and CAPABILITY_DEVELOPMENT in names:
        ignored.add(CAPABILITY_DEVELOPMENT)
    return ignored


def copy_sources(target: Path, include_development: bool = False) -> None:
    """shared/missions and capabilities/ into the layer's python/ folder, development code left out.

    `include_development`: as the layer was built before development code was left out (the web page
    aside, which never shipped), for the bench to compare with; never for a deployment."""
    before = shutil.ignore_patterns(*NEVER_SHIPPED, "web")
    shutil.copytree(
        ROOT / "shared" / "missions", target / "missions", ignore=before if include_development else _runtime_ignore
    )
    shutil.copytree(
        ROOT / "capabilities",
        target / "capabilities",
        ignore=shutil.ignore_patterns(*NEVER_SHIPPED) if include_development else _capabilities_ignore,
    )


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def kept_requirements(lock: str, providers: Collection[str]) -> tuple[list[str], set[str]]:
    """The lock's requirement lines a layer for `providers` installs, and the distributions it leaves out:
    the other providers' SDKs and what only they need (by the lock's `# via` notes, which name each
    distribution's dependents; `-r` marks one the layer asks for itself)."""
    from missions.core.settings import PROVIDER_SDKS

    unknown = set(providers) - set(PROVIDER_SDKS)
    if unknown:
        raise ValueError(f"no such provider: {sorted(unknown)} (known: {sorted(PROVIDER_SDKS)})")
    wanted = {_normalized(sdk) for provider in providers for sdk in PROVIDER_SDKS[provider]}
    unwanted = {_normalized(sdk) for sdks in PROVIDER_SDKS.values() for sdk in sdks} - wanted
    lines: dict[str, str] = {}
    dependents: dict[str, set[str]] = {}
    current = ""
    for line in lock.splitlines():
        if line and not line.startswith((" ", "#")):
            current = _normalized(re.split(r"[=<>!~ ;\[]", line, maxsplit=1)[0])
            lines[current], dependents[current] = line, set()
        elif current and (via := line.strip().removeprefix("#").strip().removeprefix("via").strip()):
            dependents[current].add("-r" if via.startswith("-r ") else _normalized(via))
    kept: set[str] = set()
    changed = True
    while changed:  # kept: asked for by the layer (an unwanted SDK aside), or needed by something kept
        changed = False
        for name, by in dependents.items():
            if name not in kept and name not in unwanted and ("-r" in by or by & kept):
                kept.add(name)
                changed = True
    return [line for name, line in lines.items() if name in kept], set(lines) - kept


def folder_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


class WrongPython(RuntimeError):
    """The interpreter building the layer is not the version the layer's bytecode is for."""


def check_interpreter(python: str = PYTHON) -> None:
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    if running != python:
        raise WrongPython(
            f"the layer's bytecode is for Python {python} (the Lambda runtime) but this is Python {running} "
            f"({sys.executable}): run layers/build.py with python{python} (e.g. the project's .venv)"
        )


def compile_bytecode(target: Path) -> None:
    """Every module's pyc next to it, checked by nobody at import (see the module docstring)."""
    compiled = compileall.compile_dir(
        target,
        ddir=LAMBDA_LAYER_PATH,  # the source paths the code objects name: where Lambda unpacks the layer
        quiet=1,
        workers=0,  # one process per CPU
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    if not compiled:
        raise RuntimeError(f"some modules in {target} do not compile under {sys.executable} (listed above)")


def build(
    out: Path,
    arch: str = "arm64",
    python: str = PYTHON,
    sources_only: bool = False,
    include_development: bool = False,
    providers: Collection[str] | None = None,
) -> Path:
    """The layer in `out` (emptied first), with the model SDKs of `providers` (None: every provider's).
    `include_development` is for the bench's before/after only."""
    from missions.core.settings import PROVIDER_SDKS

    check_interpreter(python)
    target = out / "python"
    shutil.rmtree(out, ignore_errors=True)
    target.mkdir(parents=True)
    if not sources_only:
        requirements, left_out = kept_requirements(
            LOCK.read_text(), list(PROVIDER_SDKS) if providers is None else providers
        )
        (out / "requirements.txt").write_text("\n".join(requirements) + "\n")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--only-binary=:all:",
                "--no-compile",
                "--platform",
                PLATFORMS[arch],
                "--python-version",
                python,
                "--implementation",
                "cp",
                "--target",
                str(target),
                "-r",
                str(out / "requirements.txt"),
            ],
            check=True,
        )
        (out / "requirements.txt").unlink()  # not part of the layer
        installed = {_normalized(p.name.split("-")[0]) for p in target.glob("*.dist-info")}
        if installed & left_out:  # pip resolved it back in: something kept needs it after all
            raise RuntimeError(f"the layer was to leave out {sorted(installed & left_out)}, but pip installed them")
        saved = strip_debug_files(target)  # DWARF sections some wheels ship (layers/elf.py): a fifth of the layer
        print(f"layer: {saved / 1e6:.1f} MB of debug sections left out of its native binaries")
    copy_sources(target, include_development)
    compile_bytecode(target)
    return out


def provider_of(env: str) -> str:
    """The model provider cdk.json names for an environment."""
    import json

    from infra.config import load_environments

    environments = load_environments(json.loads((ROOT / "cdk.json").read_text())["context"]["environments"])
    if env not in environments:
        raise ValueError(f"no environment '{env}' in cdk.json (it has {sorted(environments)})")
    return environments[env].llm.provider


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--arch", choices=sorted(PLATFORMS), default="arm64")
    parser.add_argument("--python", default=PYTHON)
    parser.add_argument(
        "--out", type=Path, help="default: build/layer-<env>-<arch> with --env, else build/layer-<arch>"
    )
    parser.add_argument("--sources-only", action="store_true", help="skip the dependencies (no network)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--provider", default=EVERY_PROVIDER, help="the model SDK to carry (default: every provider's)")
    which.add_argument("--env", help="the environment of cdk.json whose provider's SDK to carry")
    args = parser.parse_args()
    try:
        check_interpreter(args.python)
        providers = (
            [provider_of(args.env)] if args.env else None if args.provider == EVERY_PROVIDER else [args.provider]
        )
        if providers:
            kept_requirements("", providers)  # an unknown provider is refused before anything is built
    except (WrongPython, ValueError) as wrong:
        parser.exit(2, f"layers/build.py: {wrong}\n")
    default_out = ROOT / "build" / (f"layer-{args.env}-{args.arch}" if args.env else f"layer-{args.arch}")
    out = build(args.out or default_out, args.arch, args.python, args.sources_only, providers=providers)
    print(f"layer: {out} ({folder_mb(out):.1f} MB unzipped; Lambda allows 250 MB)")


if __name__ == "__main__":
    main()
