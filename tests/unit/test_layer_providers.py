"""A layer carries the model SDK of its environment's provider and none of another's (layers/build.py):
the other SDKs are left out with what only they need, read from the lock's `# via` notes."""

from __future__ import annotations

import subprocess
import sys
import typing
from pathlib import Path

import pytest

from infra.config import LLMConfig
from layers.build import LOCK, kept_requirements, provider_of
from missions.core.settings import PROVIDER_SDKS, RuntimeSettings

ROOT = Path(__file__).resolve().parents[2]


def _names(lines: list[str]) -> set[str]:
    return {line.split("==")[0] for line in lines}


def test_every_provider_the_settings_allow_names_its_sdk():
    # Given the providers the runtime's settings and cdk.json's environments accept
    runtime = set(typing.get_args(RuntimeSettings.model_fields["llm_provider"].annotation))
    deployed = set(typing.get_args(LLMConfig.model_fields["provider"].annotation))
    # Then each has its SDKs named (none for the offline model and Bedrock, whose boto3 Lambda has)
    assert set(PROVIDER_SDKS) == runtime == deployed
    assert PROVIDER_SDKS["scripted"] == PROVIDER_SDKS["bedrock"] == ()


@pytest.mark.parametrize(
    ("provider", "carried", "left_out"),
    [
        ("openai", {"openai", "httpx", "jiter", "anyio"}, {"anthropic", "docstring-parser"}),
        ("anthropic", {"anthropic", "httpx", "jiter", "docstring-parser"}, {"openai"}),
        ("scripted", {"pydantic", "httpx", "anyio"}, {"openai", "anthropic", "jiter", "docstring-parser"}),
    ],
)
def test_a_providers_layer_leaves_out_the_other_sdks_and_what_only_they_need(provider, carried, left_out):
    # Given the layer's lock, When the requirements of a provider's layer are read
    lines, dropped = kept_requirements(LOCK.read_text(), [provider])
    # Then its SDK and what others also need stay (httpx: the MCP SDK's too), the rest is left out
    assert carried <= _names(lines)
    assert left_out <= dropped and not left_out & _names(lines)


def test_every_providers_layer_is_the_whole_lock():
    lines, dropped = kept_requirements(LOCK.read_text(), list(PROVIDER_SDKS))
    assert dropped == set()
    assert len(lines) == sum(1 for line in LOCK.read_text().splitlines() if line and line[0] not in " #")


def test_a_dependency_stays_while_anything_kept_needs_it_however_deep():
    # Given a lock where `shared` is needed by the openai SDK and by `tool`, and `deep` only through `only`
    lock = """\
tool==1.0
    # via -r layers/requirements.in
openai==2.0
    # via -r layers/requirements.in
anthropic==3.0
    # via -r layers/requirements.in
only==1.0
    # via anthropic
deep==1.0 ; sys_platform != 'win32'
    # via only
shared==1.0
    # via
    #   -c requirements/dev.lock
    #   anthropic
    #   tool
"""
    # When the offline model's layer is read
    lines, dropped = kept_requirements(lock, ["scripted"])
    # Then only what something kept needs stays, markers and all
    assert lines == ["tool==1.0", "shared==1.0"]
    assert dropped == {"openai", "anthropic", "only", "deep"}


def test_an_unknown_provider_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match=r"no such provider: \['nope'\] \(known: \['anthropic', 'bedrock'"):
        kept_requirements(LOCK.read_text(), ["nope"])


def test_an_environments_provider_is_read_from_cdk_json():
    assert provider_of("dev") == "scripted" and provider_of("prod") == "openai"
    with pytest.raises(ValueError, match="no environment 'nope' in cdk.json"):
        provider_of("nope")


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--provider", "nope"], "layers/build.py: no such provider: ['nope']"),
        (["--env", "nope"], "layers/build.py: no environment 'nope' in cdk.json"),
    ],
)
def test_the_build_refuses_an_unknown_provider_or_environment_in_one_line(tmp_path: Path, arguments, said):
    # When the build is asked for what does not exist
    command = [sys.executable, "layers/build.py", "--sources-only", "--out", str(tmp_path / "l"), *arguments]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    # Then it says so in one line, and builds nothing
    (line,) = result.stderr.strip().splitlines()
    assert result.returncode == 2 and line.startswith(said)
    assert not (tmp_path / "l").exists()
