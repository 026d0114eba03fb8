"""A local run (`missions run`, `dev`, `chat`) takes the model's runtime settings from MISSIONS_* variables as
a deployed function does, and a model server without embeddings can be used by embedding locally."""

from __future__ import annotations

import pytest
import typer

from missions.adapters.embeddings import HashingEmbedder, OpenAIEmbedder
from missions.app.bindings import Bindings
from missions.cli._inputs import llm_settings
from missions.core.settings import RuntimeSettings

TABLES = {
    "missions_table": "missions",
    "checkpoints_table": "checkpoints",
    "events_table": "events",
    "interrupts_table": "interrupts",
    "blob_bucket": "blobs",
}


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "MISSIONS_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    return monkeypatch


def test_a_local_run_takes_the_models_tuning_from_the_environment(clean_env: pytest.MonkeyPatch):
    # Given a user's model server and the model settings they set, as in a function's environment
    clean_env.setenv("MISSIONS_LLM_MAX_OUTPUT_TOKENS", "384")
    clean_env.setenv("MISSIONS_MODEL_REPAIRS", "1")
    clean_env.setenv("MISSIONS_EMBEDDINGS", "local")
    # When the CLI makes the emulation's model settings
    settings = llm_settings()
    # Then they are there, typed, beside the provider's
    assert settings["llm_provider"] == "openai" and settings["openai_base_url"] == "http://127.0.0.1:9/v1"
    assert (settings["llm_max_output_tokens"], settings["model_repairs"], settings["embeddings"]) == (384, 1, "local")
    assert RuntimeSettings(**TABLES, **settings).llm_max_output_tokens == 384


def test_a_bad_model_setting_is_a_one_line_error_naming_it(clean_env: pytest.MonkeyPatch, capsys):
    # Given a value out of range
    clean_env.setenv("MISSIONS_MODEL_REPAIRS", "9")
    # When the CLI reads it
    with pytest.raises(typer.Exit) as exited:
        llm_settings()
    # Then it stops with a one-line error naming the variable
    assert exited.value.exit_code == 2
    assert "MISSIONS_MODEL_REPAIRS" in capsys.readouterr().err


@pytest.mark.parametrize(("embeddings", "kind"), [("provider", OpenAIEmbedder), ("local", HashingEmbedder)])
def test_embeddings_come_from_the_model_server_unless_set_local(embeddings: str, kind: type):
    # Given an OpenAI-compatible server as the provider, with or without embeddings = local
    settings = RuntimeSettings(
        **TABLES, llm_provider="openai", openai_base_url="http://127.0.0.1:9/v1", embeddings=embeddings
    )
    # When the runtime makes its embedder
    embedder = Bindings(settings).embedder
    # Then it is the server's, or the offline one for a server that has none
    assert isinstance(embedder, kind)
