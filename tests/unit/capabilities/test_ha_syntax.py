"""A proposal is spelt as the Home Assistant it targets reads it: the singular keys and `platform:`/`service:`
before 2024.8, `action:` from 2024.8, the plural keys and `trigger:` from 2024.10; the meaning never changes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capabilities.home_assistant.automation import Automation, structural_errors
from capabilities.home_assistant.syntax import OLDEST, release, spelling_errors, syntax_for, written_for

MODERN = {
    "alias": "Office lights off at night",
    "triggers": [{"trigger": "time", "at": "23:00:00"}],
    "conditions": [{"condition": "state", "entity_id": "binary_sensor.office_motion", "state": "off"}],
    "actions": [
        {"action": "light.turn_off", "target": {"entity_id": "light.office"}},
        {
            "choose": [
                {
                    "conditions": [{"condition": "trigger", "id": "late"}],
                    "sequence": [{"action": "switch.turn_off", "target": {"entity_id": "switch.office_fan"}}],
                }
            ],
            "default": [{"wait_for_trigger": [{"trigger": "state", "entity_id": "light.office", "to": "off"}]}],
        },
    ],
    "mode": "single",
}


def test_a_2024_3_server_gets_the_singular_keys_platform_and_service():
    # When the proposal is written for Home Assistant 2024.3.3
    written = written_for(MODERN, "2024.3.3")
    # Then it has the keys every version reads, down to the nested action lists and wait_for_trigger
    assert list(written) == ["alias", "trigger", "condition", "action", "mode"]
    assert written["trigger"] == [{"platform": "time", "at": "23:00:00"}]
    assert written["action"][0] == {"service": "light.turn_off", "target": {"entity_id": "light.office"}}
    choose = written["action"][1]
    assert choose["choose"][0]["sequence"][0]["service"] == "switch.turn_off"
    assert choose["choose"][0]["conditions"] == [{"condition": "trigger", "id": "late"}]  # conditions stay
    assert choose["default"][0]["wait_for_trigger"][0]["platform"] == "state"
    assert spelling_errors(written, "2024.3.3") == []


def test_a_2024_8_server_gets_action_but_still_singular_keys():
    written = written_for(MODERN, "2024.8.1")
    assert "trigger" in written and "triggers" not in written
    assert written["action"][0]["action"] == "light.turn_off"
    assert written["trigger"][0] == {"platform": "time", "at": "23:00:00"}


def test_a_2024_10_server_gets_the_plural_syntax():
    assert written_for({**MODERN, "triggers": [{"platform": "time", "at": "23:00:00"}]}, "2024.10.0") == MODERN


def test_the_plural_syntax_is_named_as_what_an_older_server_refuses():
    # Given the modern spelling, when checked for a 2024.3 server
    errors = spelling_errors(MODERN, "2024.3.3")
    # Then each plural key and each newer key inside is named, with the version that reads it
    assert any(e.startswith("triggers: Home Assistant 2024.3.3 does not read `triggers`") for e in errors)
    assert any("service:" in e and "actions[0].action" in e for e in errors)
    assert any("platform:" in e and "triggers[0].trigger" in e for e in errors)
    assert spelling_errors(MODERN, "2025.3.2") == []


@pytest.mark.parametrize(
    ("version", "expected"),
    [("2024.3.3", (2024, 3)), ("2024.10.0b1", (2024, 10)), ("2025.1.0.dev0", (2025, 1)), ("", None), (None, None)],
)
def test_versions_are_read_as_year_and_month(version: str | None, expected: tuple[int, int] | None):
    assert release(version) == expected


def test_an_unknown_version_gets_what_every_version_reads():
    assert syntax_for(None) == OLDEST and syntax_for("dev") == OLDEST


_ids = st.sampled_from(["light.office", "switch.fan", "binary_sensor.door"])
_trigger = st.builds(lambda entity: {"trigger": "state", "entity_id": entity}, _ids)
_action = st.builds(
    lambda key, service, entity: {key: service, "target": {"entity_id": entity}},
    st.sampled_from(["action", "service"]),
    st.sampled_from(["light.turn_on", "switch.turn_off"]),
    _ids,
)
_config = st.builds(
    lambda plural, triggers, actions, platform: {
        "alias": "a",
        ("triggers" if plural else "trigger"): [
            {("platform" if platform else "trigger"): t["trigger"], "entity_id": t["entity_id"]} for t in triggers
        ],
        ("actions" if plural else "action"): actions,
    },
    st.booleans(),
    st.lists(_trigger, min_size=1, max_size=3),
    st.lists(_action, min_size=1, max_size=3),
    st.booleans(),
)
_versions = st.sampled_from(["2023.12.4", "2024.3.3", "2024.8.0", "2024.9.3", "2024.10.1", "2025.3.2", None])


@given(config=_config, version=_versions)
def test_any_proposal_written_for_a_version_is_read_by_it_and_means_the_same(config: dict[str, Any], version: str):
    # When any proposal, in any spelling, is written for any version
    written = written_for(config, version)
    # Then that version reads every key of it, writing it again changes nothing, and it means the same
    assert spelling_errors(written, version) == []
    assert written_for(written, version) == written
    assert structural_errors(written) == []
    assert Automation.model_validate(written) == Automation.model_validate(config)
