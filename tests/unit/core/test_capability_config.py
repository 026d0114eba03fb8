"""capability.toml: one schema, validated when the runtime or the CDK app loads a capability;
every error names the file and the field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from missions.adapters.llm.scripted import ScriptedProvider  # noqa: F401 (the offline policy's consumer)
from missions.core.capability.config import CapabilityConfigError, load_config
from missions.core.capability.registry import Capability, Ctx, stage
from tests.support.stages import functions_by_name

VALID = """
name = "errands"
description = "runs errands"
complexity = 1
keywords = ["errand"]
tools = []
prompts = { plan = "You plan errands." }

[defaults.context]
city = "Lyon"

[bounds]
max_agent_hops = 12

[pipeline]
resume = { choice = "done" }

[[pipeline.agents]]
name = "plan"
has_llm = true
default_next = "done"

[[pipeline.agents]]
name = "done"
"""


TOOLS_WITHOUT_DECLARING_THEM = 'has_tools = true\ntool_access = "read"\nallowed_tools = ["web.search"]'


def _write(tmp_path: Path, text: str, folder: str = "errands") -> Path:
    path = tmp_path / folder / "capability.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_valid_config_loads_with_the_pipeline_named_after_the_capability(tmp_path):
    config = load_config(_write(tmp_path, VALID))
    assert (config.name, config.pipeline.name, config.complexity) == ("errands", "errands", 1)
    assert config.pipeline.bounds.max_agent_hops == 12  # [bounds] is the pipeline's
    assert config.defaults.context == {"city": "Lyon"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (("complexity = 1", "complexity = 4"), "complexity"),
        (
            ('name = "plan"\nhas_llm = true', 'name = "plan"\nhas_llm = true\ntimeout_seconds = 5000'),
            "pipeline.agents.plan.timeout_seconds",
        ),
        (("prompts = { plan", "prompts = { nowhere"), "prompts.nowhere"),
        (
            ('default_next = "done"', f'default_next = "done"\n{TOOLS_WITHOUT_DECLARING_THEM}'),
            "pipeline.agents.plan.allowed_tools",
        ),
        (("max_agent_hops = 12", "max_agent_hops = -1"), "pipeline.bounds.max_agent_hops"),
        (('description = "runs errands"', 'description = "runs errands"\ncolour = "blue"'), "colour"),
    ],
)
def test_errors_name_the_file_and_the_field(tmp_path, change, field):
    path = _write(tmp_path, VALID.replace(*change))
    with pytest.raises(CapabilityConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(str(path)) and field in message, message


def test_the_name_must_match_the_folder_and_the_file_must_be_toml(tmp_path):
    with pytest.raises(CapabilityConfigError, match="must match its folder"):
        load_config(_write(tmp_path, VALID, folder="chores"))
    with pytest.raises(CapabilityConfigError, match="not valid TOML"):
        load_config(_write(tmp_path, "name = ", folder="broken"))


class Steps(BaseModel):
    steps: list[str]


@stage
def plan(ctx: Ctx) -> Steps:
    return ctx.think(Steps)


@stage
def shop(ctx: Ctx) -> Steps:
    return Steps(steps=[])


def test_a_capability_is_built_from_the_config_and_its_packages_code(tmp_path):
    path = _write(tmp_path, VALID)
    capability = Capability.from_config(
        load_config(path), stages=functions_by_name(plan), offline_policy=lambda r: {"steps": []}, source=str(path)
    )
    assert capability.complexity == 1 and capability.prompts == {"plan": "You plan errands."}
    assert capability.default_context == {"city": "Lyon"} and capability.describe()["complexity"] == 1
    # an LLM stage without a stage function is a wiring error, reported against the file
    with pytest.raises(CapabilityConfigError, match=re.escape(str(path))):
        Capability.from_config(
            load_config(path), stages=functions_by_name(), offline_policy=lambda r: {}, source=str(path)
        )
    # and so is a function for a stage the config does not have
    with pytest.raises(CapabilityConfigError, match=re.escape(str(path)) + ".*'shop'"):
        Capability.from_config(
            load_config(path), stages=functions_by_name(plan, shop), offline_policy=lambda r: {}, source=str(path)
        )
