"""Where the OpenAI key comes from: local settings first, else Secrets Manager, never the environment in AWS."""

from __future__ import annotations

from missions.settings import RuntimeSettings
from missions.wiring import Runtime

TABLES = {f"{name}_table": f"t-{name}" for name in ("missions", "checkpoints", "events", "interrupts")}


def _runtime(reads: list[str], **settings) -> Runtime:
    def read_secret(secret_id: str) -> str:
        reads.append(secret_id)
        return "sk-from-secrets-manager"

    return Runtime(RuntimeSettings(blob_bucket="blobs", **TABLES, **settings), read_secret=read_secret)


def test_the_deployed_key_is_read_from_the_named_secret():
    reads: list[str] = []
    runtime = _runtime(reads, llm_provider="openai", openai_secret="missions-prod/openai-api-key")
    assert runtime.openai_api_key() == "sk-from-secrets-manager"
    assert reads == ["missions-prod/openai-api-key"]


def test_a_local_key_wins_and_no_secret_is_read():
    reads: list[str] = []
    runtime = _runtime(reads, llm_provider="openai", openai_api_key="sk-local", openai_secret="unused")
    assert runtime.openai_api_key() == "sk-local" and reads == []


def test_settings_take_the_secret_name_from_the_environment():
    settings = RuntimeSettings.from_env(
        {
            **{f"MISSIONS_{k.upper()}": v for k, v in TABLES.items()},
            "MISSIONS_BLOB_BUCKET": "blobs",
            "MISSIONS_OPENAI_SECRET": "missions-dev/openai-api-key",
            "MISSIONS_INTERRUPT_SLA_HOURS": "48",
        }
    )
    assert settings.openai_secret == "missions-dev/openai-api-key" and settings.interrupt_sla_hours == 48
    assert settings.openai_api_key is None
