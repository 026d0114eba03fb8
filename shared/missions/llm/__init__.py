"""LLM providers. Importing this package never imports the openai SDK (cold starts matter)."""

from missions.llm.base import LLMError, LLMProvider, LLMRequest, LLMResult, TransientLLMError
from missions.llm.scripted import OfflinePolicy, ScriptedProvider

__all__ = [
    "LLMError",
    "LLMProvider",
    "LLMRequest",
    "LLMResult",
    "OfflinePolicy",
    "ScriptedProvider",
    "TransientLLMError",
]
