"""Prices: every model a deployment can call has one, so a mission's dollar budget always binds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from missions.core.cost.pricing import PRICES_PER_MILLION, cost_usd, price_of, unpriced
from missions.core.settings import RuntimeSettings, SettingsError

TABLES = {"missions_table": "m", "checkpoints_table": "c", "events_table": "e", "interrupts_table": "i"}
BASE = {f"MISSIONS_{k.upper()}": v + "xx" for k, v in TABLES.items()} | {"MISSIONS_BLOB_BUCKET": "bucket"}


def test_a_dated_snapshot_is_priced_as_its_family_and_an_unknown_model_not_at_all():
    assert price_of("gpt-4o-mini-2024-07-18") == PRICES_PER_MILLION["gpt-4o-mini"]
    assert price_of("llama-3-70b") is None
    assert price_of("llama-3-70b", {"llama-3": (0.2, 0.4)}) == (0.2, 0.4)
    assert unpriced(["gpt-4o", None, "mystery", "mystery"]) == ["mystery"]


def test_an_unpriced_call_is_an_error_not_a_free_one():
    with pytest.raises(LookupError, match="no price for model 'mystery'"):
        cost_usd("mystery", 10, 10)


@given(
    model=st.sampled_from(sorted(PRICES_PER_MILLION)), tokens_in=st.integers(0, 10**7), tokens_out=st.integers(0, 10**7)
)
def test_every_listed_model_costs_more_the_more_it_is_used(model, tokens_in, tokens_out):
    cost = cost_usd(model, tokens_in, tokens_out)
    assert cost >= 0 and cost_usd(model, tokens_in + 1000, tokens_out + 1000) >= cost


def test_settings_that_name_an_unpriced_model_are_refused_at_start():
    # Given an OpenAI-compatible deployment whose planner runs a model with no price
    environ = BASE | {"MISSIONS_LLM_PROVIDER": "openai", "MISSIONS_OPENAI_MODELS": '{"planner": "llama-3-70b"}'}
    # When the settings are read / Then they are refused, saying how to price it
    with pytest.raises(SettingsError, match=r"no price for model\(s\) \['llama-3-70b'\].*openai_prices"):
        RuntimeSettings.from_env(environ)
    # And priced by configuration, they are taken
    priced = RuntimeSettings.from_env(environ | {"MISSIONS_OPENAI_PRICES": '{"llama-3-70b": [0.5, 2.0]}'})
    assert priced.openai_prices == {"llama-3-70b": (0.5, 2.0)}


def test_the_fallback_model_needs_a_price_too():
    environ = BASE | {"MISSIONS_LLM_PROVIDER": "openai", "MISSIONS_OPENAI_FALLBACK_MODEL": "mystery-large"}
    with pytest.raises(SettingsError, match="mystery-large"):
        RuntimeSettings.from_env(environ)


def test_the_offline_model_needs_no_price():
    assert RuntimeSettings.from_env(BASE).llm_provider == "scripted"
