"""What the command line and the environment give the embedded emulation: a capability by name, a
mission's context, the roots it may read, its operators, and which model it asks."""

from __future__ import annotations

import json
import os
from typing import Any

from missions.core.capability import registry as registry

from ._console import fail


def capability(name: str) -> registry.Capability:
    """An installed capability, or the one line naming the ones there are."""
    try:
        return registry.load(name)
    except registry.UnknownCapability as exc:
        fail(str(exc))


def repo_roots(paths: list[str]) -> list[str]:
    """The directories missions may read, checked and normalised."""
    from missions.core.roots import AllowedRoots, PathRefused

    for path in paths:
        if not os.path.isdir(os.path.expanduser(path)):
            fail(f"{path} is not a directory")
    try:
        return [str(root) for root in AllowedRoots.of(paths).roots]
    except PathRefused as exc:
        fail(str(exc))


def parse_context(text: str | None) -> dict[str, Any]:
    """--context: a JSON object (none given: empty)."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"--context is not valid JSON: {exc.msg}")
    if not isinstance(value, dict):
        fail("--context must be a JSON object")
    return value


def operators_from_env() -> list[str]:
    """MISSIONS_OPERATORS: a JSON list of the users who may change agent configurations."""
    text = os.environ.get("MISSIONS_OPERATORS", "").strip()
    if not text:
        return []
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        fail("MISSIONS_OPERATORS must be a JSON list of user names")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        fail("MISSIONS_OPERATORS must be a JSON list of user names")
    return value


# the runtime settings of the model a local run takes from MISSIONS_* variables as a deployed function does
# (the rest the emulation decides: its tables, buckets and ARNs)
MODEL_TUNING = (
    "model_repairs",
    "llm_max_output_tokens",
    "llm_tokens_per_second",
    "llm_first_token_seconds",
    "openai_stream",
    "openai_prices",
    "openai_fallback_model",
    "anthropic_fallback_model",
    "embeddings",
)


def model_tuning() -> dict[str, Any]:
    """The MODEL_TUNING settings set in the environment, validated as a function's would be (a bad value is
    a one-line error)."""
    from missions.core.settings import PREFIX, RuntimeSettings, SettingsError

    named = {f"{PREFIX}{name.upper()}": name for name in MODEL_TUNING}
    present = {key: value for key, value in os.environ.items() if key in named}
    if not present:
        return {}
    # what the emulation names (its tables, its bucket) is not the environment's: a stand-in to validate these
    standing_in = {
        f"{PREFIX}{name.upper()}": "stand-in" for name, f in RuntimeSettings.model_fields.items() if f.is_required()
    }
    try:
        settings = RuntimeSettings.from_env({**standing_in, **present})
    except SettingsError as exc:
        fail(str(exc))
    return {named[key]: getattr(settings, named[key]) for key in present}


def llm_settings() -> dict[str, Any]:
    """The model provider the local emulation asks, from the environment: MISSIONS_LLM_PROVIDER names it
    (openai, anthropic, scripted); otherwise OPENAI_API_KEY or OPENAI_BASE_URL means OpenAI, and
    ANTHROPIC_API_KEY or ANTHROPIC_BASE_URL Anthropic; none: the offline scripted model."""
    named = os.environ.get("MISSIONS_LLM_PROVIDER", "").strip().lower()
    if named == "bedrock":
        fail("Bedrock runs in AWS only (the emulation is moto's): deploy, or use openai or anthropic locally")
    if named not in ("", "openai", "anthropic", "scripted"):
        fail(f"MISSIONS_LLM_PROVIDER must be openai, anthropic or scripted, not {named!r}")
    if named == "scripted":
        return model_tuning()
    openai_set = bool(os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"))
    anthropic_set = bool(os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_BASE_URL"))
    provider = named or ("openai" if openai_set else "anthropic" if anthropic_set else "")
    if not provider:
        return model_tuning()
    prefix = provider.upper()  # OPENAI_* / ANTHROPIC_*: each SDK's own variables
    settings: dict[str, Any] = {
        **model_tuning(),
        "llm_provider": provider,
        f"{provider}_api_key": os.environ.get(f"{prefix}_API_KEY"),
        f"{provider}_base_url": os.environ.get(f"{prefix}_BASE_URL"),
    }
    if os.environ.get(f"MISSIONS_{prefix}_DEFAULT_MODEL"):
        settings[f"{provider}_default_model"] = os.environ[f"MISSIONS_{prefix}_DEFAULT_MODEL"]
    if os.environ.get(f"MISSIONS_{prefix}_MODELS"):
        try:
            settings[f"{provider}_models"] = json.loads(os.environ[f"MISSIONS_{prefix}_MODELS"])
        except json.JSONDecodeError:
            fail(f"MISSIONS_{prefix}_MODELS must be a JSON object of role -> model")
    return settings


def model_label(llm: dict[str, Any]) -> str:
    """Which model the emulation asks, as `run` and `chat` announce it."""
    provider = llm.get("llm_provider")
    if not provider:
        return "the offline scripted model"
    default = {"openai": "an OpenAI-compatible model", "anthropic": "claude-haiku-4-5"}[provider]
    return str(llm.get(f"{provider}_default_model", default))
