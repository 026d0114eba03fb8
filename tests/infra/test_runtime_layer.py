"""The runtime layer each environment deploys carries its provider's model SDK: the synth refuses one without
it, and says how to build the right one (layers/build.py --env)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Template

from infra.components.functions import RuntimeLayer
from infra.config import EnvironmentConfig, load_environments

ROOT = Path(__file__).resolve().parents[2]


def _environment(name: str) -> EnvironmentConfig:
    return load_environments(json.loads((ROOT / "cdk.json").read_text())["context"]["environments"])[name]


def _layer(tmp_path: Path, *packages: str) -> Path:
    for package in ("missions", *packages):
        (tmp_path / "layer" / "python" / package).mkdir(parents=True)
    return tmp_path / "layer"


def test_a_layer_without_the_environments_model_sdk_is_refused_with_how_to_build_it(tmp_path: Path):
    # Given staging, whose functions call OpenAI, and a layer with dependencies but without the openai SDK
    staging = _environment("staging")
    assert staging.llm.provider == "openai"
    layer = _layer(tmp_path, "pydantic", "anthropic")
    # When its stack's layer is made, Then the synth is refused, naming the SDK and the build that makes it
    with pytest.raises(FileNotFoundError) as refused:
        RuntimeLayer(Stack(App(), "S"), "Runtime", layer_dir=layer, config=staging)
    assert "has no openai SDK" in str(refused.value) and "llm.provider openai" in str(refused.value)
    assert f"layers/build.py --arch {staging.architecture} --env staging --out {layer}" in str(refused.value)


def test_a_layer_with_the_environments_sdk_names_it_and_an_offline_environment_needs_none(tmp_path: Path):
    # Given a layer with the openai SDK, and one with no SDK at all
    with_openai = _layer(tmp_path / "a", "pydantic", "openai")
    without = _layer(tmp_path / "b", "pydantic")
    # When staging (openai) and dev (the offline model) make theirs
    staging = Stack(App(), "Staging")
    RuntimeLayer(staging, "Runtime", layer_dir=with_openai, config=_environment("staging"))
    dev = Stack(App(), "Dev")
    RuntimeLayer(dev, "Runtime", layer_dir=without, config=_environment("dev"))
    # Then both synthesize, each describing what it carries
    described = {
        name: next(iter(Template.from_stack(stack).find_resources("AWS::Lambda::LayerVersion").values()))["Properties"][
            "Description"
        ]
        for name, stack in (("staging", staging), ("dev", dev))
    }
    assert described["staging"].endswith(", openai") and "openai" not in described["dev"]


def test_a_sources_only_layer_synthesizes_for_any_provider(tmp_path: Path):
    # Given a layer built with --sources-only (no dependencies: the synth tests' layer)
    layer = _layer(tmp_path)
    # When staging's layer is made from it, Then nothing is refused: it carries no dependency at all
    RuntimeLayer(Stack(App(), "S"), "Runtime", layer_dir=layer, config=_environment("staging"))
