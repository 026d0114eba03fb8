"""Where the OpenAI key comes from: local settings first, else Secrets Manager, never the environment in AWS."""

from __future__ import annotations

from missions.app.runtime import Runtime
from missions.core.settings import RuntimeSettings

TABLES = {f"{name}_table": f"t-{name}" for name in ("missions", "checkpoints", "events", "interrupts")}


class FakeSecrets:
    """The SecretReader port, remembering what was read."""

    def __init__(self, reads: list[str]):
        self.reads = reads

    def read(self, secret_id: str) -> str:
        self.reads.append(secret_id)
        return "sk-from-secrets-manager"


def _runtime(reads: list[str], **settings) -> Runtime:
    return Runtime(RuntimeSettings(blob_bucket="blobs", **TABLES, **settings), secrets=FakeSecrets(reads))


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
