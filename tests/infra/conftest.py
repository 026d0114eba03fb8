"""One synthesized CDK assembly per test module (synth costs ~8 s and ~1 GB: shared, never repeated
per test). The layer is built sources-only: the template does not depend on its contents."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# the CDK library's jsii runtime runs on the Node 24 LTS that `make node` installs (as `make test` does);
# a bare `pytest` on a machine without it falls back to the machine's Node, quietly if that is Node 20
_NODE_BIN = Path(__file__).resolve().parents[2] / "node_modules" / ".bin"
if (_NODE_BIN / "node").exists() and not os.environ.get("PATH", "").startswith(str(_NODE_BIN)):
    os.environ["PATH"] = f"{_NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


@dataclass
class Assembly:
    directory: Path
    templates: dict[str, dict[str, Any]]  # environment -> template

    def resources(self, env: str, type_: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.templates[env]["Resources"].items() if r["Type"] == type_}


def synthesize(
    directory: Path, environments: list[str] | None = None, context: dict[str, Any] | None = None
) -> Assembly:
    from infra.app import build_app
    from layers.build import build

    layer = build(directory / "layer", sources_only=True)
    app = build_app(environments=environments, layer_dir=layer, outdir=str(directory / "cdk.out"), context=context)
    assembly = app.synth()
    templates = {
        stack.stack_name.removeprefix("missions-"): json.loads(
            (Path(assembly.directory) / stack.template_file).read_text()
        )
        for stack in assembly.stacks
    }
    return Assembly(Path(assembly.directory), templates)


@pytest.fixture(scope="module")
def assembly(tmp_path_factory: pytest.TempPathFactory) -> Assembly:
    """dev, staging and prod as cdk.json defines them."""
    return synthesize(tmp_path_factory.mktemp("synth"))
