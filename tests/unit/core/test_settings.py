"""One settings model: the stack writes function environments with it, functions read them back with it."""

from __future__ import annotations

import pytest

from missions.core.settings import RuntimeSettings, SettingsError, environment_of

TABLES = {f"{name}_table": f"t-{name}" for name in ("missions", "checkpoints", "events", "interrupts")}


def test_an_environment_written_by_the_model_reads_back_as_the_same_settings():
    # Given settings as the CDK stack writes them (lists and dicts as JSON, booleans as true/false)
    written = environment_of(
        **TABLES,
        blob_bucket="b-blobs",
        concurrency_limit=5,
        repo_roots=["/mnt/repos"],
        local_git_sources=True,
        state_machine_arns={"code_analysis": "arn:aws:states:us-east-1:1:stateMachine:x"},
        checkpoint_ttl_days=None,  # unset: not written at all
    )
    assert "MISSIONS_CHECKPOINT_TTL_DAYS" not in written and written["MISSIONS_LOCAL_GIT_SOURCES"] == "true"
    # When a function reads its environment
    settings = RuntimeSettings.from_env(written)
    # Then it has exactly those settings
    assert settings.concurrency_limit == 5 and settings.repo_roots == ["/mnt/repos"] and settings.local_git_sources
    assert settings.state_machine_arns == {"code_analysis": "arn:aws:states:us-east-1:1:stateMachine:x"}


def test_a_misspelt_setting_is_an_error_in_the_stack_and_in_the_function():
    with pytest.raises(SettingsError, match="concurency_limit"):
        environment_of(concurency_limit=3)
    with pytest.raises(SettingsError, match="MISSIONS_CONCURENCY_LIMIT"):
        RuntimeSettings.from_env({**environment_of(**TABLES, blob_bucket="b-blobs"), "MISSIONS_CONCURENCY_LIMIT": "3"})


def test_the_cli_client_variables_are_not_runtime_settings():
    environment = {
        **environment_of(**TABLES, blob_bucket="b-blobs"),
        "MISSIONS_API_URL": "https://x",
        "MISSIONS_STREAM_URL": "https://y",
        "MISSIONS_DEBUG": "1",
    }
    assert RuntimeSettings.from_env(environment).blob_bucket == "b-blobs"


def test_the_clis_own_variables_are_not_runtime_settings():
    # Given a shell where the CLI is configured as a client of a deployed API (a machine's credentials)
    environ = {
        "MISSIONS_MISSIONS_TABLE": "m-table",
        "MISSIONS_CHECKPOINTS_TABLE": "c-table",
        "MISSIONS_EVENTS_TABLE": "e-table",
        "MISSIONS_INTERRUPTS_TABLE": "i-table",
        "MISSIONS_BLOB_BUCKET": "blobs",
        "MISSIONS_CLIENT_ID": "abc",
        "MISSIONS_CLIENT_SECRET": "shh",
        "MISSIONS_CONFIG_DIR": "/tmp/x",
        "MISSIONS_STREAM_URL": "https://x.lambda-url.us-east-1.on.aws/",
    }
    # Then the runtime in the same shell (missions dev, missions run) starts: they are the client's, not unknown
    assert RuntimeSettings.from_env(environ).missions_table == "m-table"
