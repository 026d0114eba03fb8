"""Which Home Assistant a mission talks to, from HA_URL / HA_TOKEN: the sample home when none is set;
and the data layer stays invisible to the capability registry until its capability is complete."""

from __future__ import annotations

import importlib

import pytest

from capabilities.home_assistant.dev.sample import SampleHome
from capabilities.home_assistant.ha import HASettings, HATokenRejected, connect, ha_settings
from capabilities.home_assistant.ha.rest import RestHomeAssistant
from missions.core.capability import registry as registry


def test_no_HA_URL_means_the_sample_home() -> None:
    settings = ha_settings({"HA_URL": "  ", "HA_TOKEN": ""})
    assert settings == HASettings()
    assert not settings.configured
    assert isinstance(connect(settings), SampleHome)


def test_HA_URL_and_HA_TOKEN_mean_a_real_home_assistant() -> None:
    settings = ha_settings({"HA_URL": "http://homeassistant.local:8123", "HA_TOKEN": "secret-token"})
    assert settings.configured
    assert "secret-token" not in repr(settings)  # settings get logged; the token must not
    ha = connect(settings)
    assert isinstance(ha, RestHomeAssistant)
    assert ha.host == "homeassistant.local:8123"
    assert "secret-token" not in repr(ha)


def test_in_AWS_the_token_comes_from_a_provider() -> None:
    settings = ha_settings({"HA_URL": "https://ha.example.org", "HA_TOKEN_SECRET": "missions/ha-token"})
    assert settings.token is None and settings.token_secret == "missions/ha-token"
    with pytest.raises(HATokenRejected, match="HA_TOKEN_SECRET is set but no secret reader"):
        connect(settings)
    assert isinstance(connect(settings, token_provider=lambda: "from-secrets-manager"), RestHomeAssistant)


def test_a_URL_that_is_not_http_is_refused() -> None:
    with pytest.raises(ValueError, match="http"):
        RestHomeAssistant("ftp://ha.local", "t")
    with pytest.raises(ValueError, match="exactly one"):
        RestHomeAssistant("http://ha.local:8123")


def test_the_data_layer_is_part_of_the_capability_not_a_capability_of_its_own() -> None:
    # The capability is installed; its data layer (ha/) is a subpackage the registry does not list
    assert "home_assistant" in registry.default_registry().installed()
    assert not [name for name in registry.default_registry().installed() if name.startswith("ha")]
    assert importlib.import_module("capabilities.home_assistant.ha.port").HomeAssistant
