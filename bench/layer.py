"""The Lambda layer before and after its development code was left out: size, files, cold imports.

"Before" is the layer as layers/build.py built it while it still carried the emulation, the CLI, the
HTTP client and each capability's dev/ package (`include_development`); "after" is the layer as shipped.
Both are built in the same run: sources only (no network: the runtime's own code), and with the
dependencies where bench/run.py builds them for its import times, which then also imports the stages
from each layer, as ratios to `import boto3` measured in the same run (`IMPORTS`, `import_times`).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any, TypedDict

from bench.infra import folder_bytes, zipped_bytes


class LayerFigures(TypedDict):
    """A built layer's size (`figures`)."""

    unzipped_mb: float
    zipped_mb: float
    files: int


class LayerComparison(TypedDict):
    """Two layers' figures, and after as a fraction of before (`compared`)."""

    before: LayerFigures
    after: LayerFigures
    unzipped_ratio: float
    files_ratio: float


def figures(layer: Path) -> LayerFigures:
    """A built layer's size: MB unzipped and zipped (what Lambda stores), and how many files."""
    return {
        "unzipped_mb": round(folder_bytes(layer) / 1e6, 2),
        "zipped_mb": round(zipped_bytes(layer) / 1e6, 2),
        "files": sum(1 for f in layer.rglob("*") if f.is_file()),
    }


def compared(before: Path, after: Path) -> LayerComparison:
    """Both layers' figures, and after as a fraction of before."""
    was, now = figures(before), figures(after)
    return {
        "before": was,
        "after": now,
        "unzipped_ratio": round(now["unzipped_mb"] / was["unzipped_mb"], 3),
        "files_ratio": round(now["files"] / was["files"], 3),
    }


def with_development(layer: Path, into: Path) -> Path:
    """The layer (its python/ folder) as built before: the same dependencies, the sources with their
    development code, all compiled as layers/build.py compiles them."""
    from layers.build import compile_bytecode, copy_sources

    shutil.copytree(layer, into)
    for own in ("missions", "capabilities"):
        shutil.rmtree(into / own)
    copy_sources(into, include_development=True)
    compile_bytecode(into)
    return into


def run() -> LayerComparison:
    """The sources-only layers, before and after."""
    from layers.build import build

    with tempfile.TemporaryDirectory(prefix="missions-bench-layer-") as scratch:
        work = Path(scratch)
        before = build(work / "before", sources_only=True, include_development=True)
        after = build(work / "after", sources_only=True)
        return compared(before, after)


def rows(sources_only: LayerComparison, imports: dict[str, Any]) -> list[tuple[str, str]]:
    def size(figures: LayerFigures) -> str:
        return f"{figures['unzipped_mb']} MB ({figures['zipped_mb']} MB zipped), {figures['files']} files"

    out = [
        ("layer sources only: with development code (before)", size(sources_only["before"])),
        (
            "layer sources only: production code only (after)",
            f"{size(sources_only['after'])}; {sources_only['unzipped_ratio']}x the size, "
            f"{sources_only['files_ratio']}x the files",
        ),
    ]
    full = imports.get("layer_with_dependencies")
    if full:
        out.append(("layer with dependencies: before", size(full["before"])))
        out.append(("layer with dependencies: after", f"{size(full['after'])}; {full['unzipped_ratio']}x the size"))
    for stage, label in (("non_llm", "non-LLM"), ("llm", "LLM")):
        if f"{stage}_import_ratio_before" in imports:
            out.append(
                (
                    f"import {label} stage handler: layer before / after (x boto3)",
                    f"{imports[f'{stage}_import_ratio_before']}x / {imports[f'{stage}_import_ratio']}x",
                )
            )
    return out
