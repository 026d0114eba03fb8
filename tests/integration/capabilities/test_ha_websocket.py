"""HA's websocket API over a real websocket (the fake server on localhost): the handshake, one command's
result, and each way it can fail as the port's own error, the token never shown."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

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


# -- tried again as an HTTP request is: when nothing was sent, and when running it twice is harmless ---------


class SlowHome(SampleHome):
    """The sample home, whose registries answer late the first `late` times, and whose dashboards'
    deletion always answers late; each counted."""

    def __init__(self, seconds: float, late: int = 0) -> None:
        super().__init__()
        self.seconds, self.late, self.asked = seconds, late, Counter[str]()

    def registries(self) -> Any:
        self.asked["registries"] += 1
        if self.asked["registries"] <= self.late:
            time.sleep(self.seconds)
        return super().registries()

    def lovelace_commands(self) -> dict[str, Any]:
        found = super().lovelace_commands()
        delete = found["lovelace/dashboards/delete"]

        def late_delete(fields: dict[str, Any]) -> Any:
            self.asked["delete"] += 1
            time.sleep(self.seconds)
            return delete(fields)

        return {**found, "lovelace/dashboards/delete": late_delete}


def test_a_websocket_that_did_not_open_is_opened_again(fake: FakeHomeAssistant):
    # Given a home that is down, and comes back while the client waits to try again
    fake.down()
    waits: list[float] = []

    def wait(seconds: float) -> None:
        waits.append(seconds)
        fake.up()

    # When the client reads its registries
    with RestHomeAssistant(fake.url, fake.token, sleep=wait) as ha:
        registries = ha.registries()
    # Then the second attempt reads them
    assert registries.entities and waits == [0.5]


def test_a_read_whose_answer_came_late_is_asked_again():
    # Given a home whose registries answer after the client's timeout, once
    home = SlowHome(seconds=1.5, late=1)
    with serve(home) as fake, RestHomeAssistant(fake.url, fake.token, timeout=0.5, sleep=lambda _: None) as ha:
        # When the client reads them, Then it asks again and gets them
        assert ha.registries().entities
    assert home.asked["registries"] == 4  # the late one, then the area, device and entity lists


def test_a_change_whose_answer_came_late_is_not_run_twice():
    # Given a home whose dashboard deletion answers after the client's timeout
    home = SlowHome(seconds=1.5)
    late = r"did not answer lovelace/dashboards/delete .*it may have run it"
    # When the client deletes a dashboard, Then it says HA may have run it, and did not ask twice
    with (
        serve(home) as fake,
        RestHomeAssistant(fake.url, fake.token, timeout=0.5, sleep=lambda _: None) as ha,
        pytest.raises(HAUnreachable, match=late),
    ):
        ha.delete_dashboard("energy_overview")
    assert home.asked["delete"] == 1
