"""HA's websocket API over a real websocket (the fake server on localhost): the handshake, one command's
result, and each way it can fail as the port's own error, the token never shown."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from capabilities.home_assistant.dev.fake_server import FakeHomeAssistant, serve
from capabilities.home_assistant.dev.sample import SampleHome
from capabilities.home_assistant.ha import HABadRequest, HATokenRejected, HAUnreachable, HAUnsupported
from capabilities.home_assistant.ha.rest import RestHomeAssistant
from capabilities.home_assistant.ha.websocket import HAWebSocket

GOOD = {
    "alias": "Office lights off at night",
    "triggers": [{"trigger": "time", "at": "23:00:00"}],
    "actions": [{"action": "light.turn_off", "target": {"entity_id": "light.office_ceiling"}}],
}


@pytest.fixture
def fake() -> Iterator[FakeHomeAssistant]:
    with serve(SampleHome()) as server:
        yield server


def _socket(fake: FakeHomeAssistant, token: str | None = None) -> HAWebSocket:
    return HAWebSocket(fake.url + "/", lambda: token or fake.token, host="127.0.0.1", timeout=5)


def test_an_automation_ha_takes_has_no_refusals(fake: FakeHomeAssistant):
    # Given the REST client of a home (the websocket API beside it)
    with RestHomeAssistant(fake.url, fake.token) as ha:
        # When HA checks an automation in the syntax its version reads, then one in a spelling it does not
        good, bad = ha.validate_automation(GOOD), ha.validate_automation({**GOOD, "triggers": [{"at": "23:00"}]})
    # Then the first passes, and the second is refused part by part in HA's words
    assert good == []
    assert bad == ["triggers: required key not provided @ data[0]['trigger']"]


def test_a_command_ha_refuses_is_HABadRequest_with_its_message(fake: FakeHomeAssistant):
    with pytest.raises(HABadRequest, match=r"refused validate_config: extra keys not allowed @ data\['bogus'\]"):
        _socket(fake).call("validate_config", bogus=[])


def test_a_command_this_release_lacks_is_HAUnsupported(fake: FakeHomeAssistant):
    with pytest.raises(HAUnsupported, match="does not know lovelace/nothing"):
        _socket(fake).call("lovelace/nothing")


def test_a_wrong_token_is_rejected_and_never_shown(fake: FakeHomeAssistant):
    with pytest.raises(HATokenRejected) as raised:
        _socket(fake, token="not-the-token").call("get_config")
    assert "not-the-token" not in str(raised.value)


def test_a_home_that_is_down_is_HAUnreachable(fake: FakeHomeAssistant):
    socket = _socket(fake)
    fake.down()
    with pytest.raises(HAUnreachable, match="did not open its websocket API"):
        socket.call("get_config")


def test_a_command_answers_its_result(fake: FakeHomeAssistant):
    assert _socket(fake).call("get_config")["version"] == fake.home.config().version
