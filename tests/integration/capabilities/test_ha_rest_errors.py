"""RestHomeAssistant when Home Assistant misbehaves: each failure ends, within the deadline, in the
port's error for it, retried only when retrying can help, and the token is never in what is shown
or logged. Against the fake server on localhost (real sockets), or a closed port."""

from __future__ import annotations

import logging
import socket
import time
import traceback
from collections.abc import Iterator

import httpx2
import pytest

from capabilities.home_assistant.dev.fake_server import FakeHomeAssistant, serve
from capabilities.home_assistant.dev.sample import SampleHome
from capabilities.home_assistant.ha import HABadRequest, HAError, HATokenRejected, HAUnknownEntity, HAUnreachable
from capabilities.home_assistant.ha.rest import RestHomeAssistant

TOKEN = "eyJhbGciOiJIUzI1NiJ9.super-secret-long-lived-token.QWERTY123456"
FACTS = SampleHome().facts


@pytest.fixture
def fake() -> Iterator[FakeHomeAssistant]:
    with serve(SampleHome(), token=TOKEN) as server:
        yield server


def client(url: str, token: str = TOKEN, **options: object) -> RestHomeAssistant:
    settings: dict[str, object] = {"timeout": 2.0, "deadline": 5.0, "backoff": 0.05}
    settings.update(options)
    return RestHomeAssistant(url, token, **settings)  # type: ignore[arg-type]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def shown(exc: BaseException) -> str:
    """Everything a mission or a log could show of an error: message, repr, traceback."""
    return f"{exc}\n{exc!r}\n{''.join(traceback.format_exception(exc))}"


def test_a_wrong_token_is_HATokenRejected_without_retrying(fake: FakeHomeAssistant) -> None:
    # Given a client with another token than the house's
    ha = client(fake.url, token="not-the-right-token")
    # When it reads the states
    with pytest.raises(HATokenRejected) as raised:
        ha.states()
    # Then HA said 401 once (a retry cannot fix a token), and the message says what to do
    assert raised.value.status == 401
    assert [r.authorized for r in fake.requests] == [False]
    message = str(raised.value)
    assert "127.0.0.1" in message and "long-lived access token" in message
    assert "not-the-right-token" not in shown(raised.value)


def test_an_unknown_entity_or_automation_is_HAUnknownEntity(fake: FakeHomeAssistant) -> None:
    ha = client(fake.url)
    with pytest.raises(HAUnknownEntity) as raised:
        ha.state("sensor.nope")
    assert raised.value.entity_id == "sensor.nope" and raised.value.status == 404
    with pytest.raises(HAUnknownEntity):
        ha.automation_config("no-such-id")
    with pytest.raises(HAUnknownEntity):
        ha.delete_automation_config("no-such-id")  # HA answers 400 "Resource not found" to this one
    assert len(fake.requests) == 3  # none retried


def test_a_closed_port_is_HAUnreachable_quickly() -> None:
    # Given nothing listens on the port
    ha = client(f"http://127.0.0.1:{closed_port()}", attempts=3)
    # When a state is read
    started = time.monotonic()
    with pytest.raises(HAUnreachable) as raised:
        ha.state(FACTS.home_power)
    # Then it gives up after its attempts, at once, naming the host and not the token
    assert time.monotonic() - started < 2.0
    message = str(raised.value)
    assert "127.0.0.1" in message and "unreachable" in message and "3 attempts" in message
    assert TOKEN not in shown(raised.value)


def test_a_house_that_goes_down_and_up_again(fake: FakeHomeAssistant) -> None:
    ha = client(fake.url, attempts=1)
    assert ha.state(FACTS.home_power).state
    fake.down()
    with pytest.raises(HAUnreachable):
        ha.state(FACTS.home_power)
    fake.up()
    assert ha.state(FACTS.home_power).state


def test_503_then_200_is_retried_and_succeeds(fake: FakeHomeAssistant) -> None:
    # Given HA answers 503 once (restarting), then normally
    fake.fail(503, times=1)
    # When a state is read
    state = client(fake.url).state(FACTS.home_power)
    # Then the second attempt answered it
    assert state.entity_id == FACTS.home_power
    assert len(fake.requests) == 2


def test_429_waits_what_retry_after_asks(fake: FakeHomeAssistant) -> None:
    # Given HA is throttling and asks for 2 s
    fake.fail(429, times=1, retry_after=2)
    waited: list[float] = []
    ha = client(fake.url, sleep=waited.append)
    # When a state is read
    state = ha.state(FACTS.home_power)
    # Then the client waited exactly that long (not its own backoff) and then succeeded
    assert waited == [2.0]
    assert state.entity_id == FACTS.home_power


def test_429_asking_for_longer_than_the_deadline_fails_at_once(fake: FakeHomeAssistant) -> None:
    fake.fail(429, times=5, retry_after=600)
    waited: list[float] = []
    with pytest.raises(HAError) as raised:
        client(fake.url, sleep=waited.append, deadline=5.0).states()
    assert waited == []  # never slept 600 s of a 5 s budget
    assert raised.value.status == 429 and "asks to wait 600 s" in str(raised.value)


def test_a_real_retry_after_wait_is_honoured(fake: FakeHomeAssistant) -> None:
    fake.fail(429, times=1, retry_after=0.3)
    started = time.monotonic()
    client(fake.url).states()
    assert time.monotonic() - started >= 0.3


def test_persistent_500_is_HAError_after_the_bounded_attempts(fake: FakeHomeAssistant) -> None:
    fake.fail(500, times=100)
    with pytest.raises(HAError) as raised:
        client(fake.url, attempts=3).states()
    assert type(raised.value) is HAError and raised.value.status == 500
    assert len(fake.requests) == 3
    assert "HTTP 500" in str(raised.value) and "3 attempts" in str(raised.value)


def test_a_service_call_is_not_retried_after_a_500_but_is_after_a_503(fake: FakeHomeAssistant) -> None:
    # A 500 may come after the light was toggled: calling again could toggle it back
    fake.fail(500, times=1)
    with pytest.raises(HAError):
        client(fake.url).call_service("light", "toggle", {"entity_id": "light.kitchen_ceiling"})
    assert len(fake.requests) == 1
    # A 503 means HA did not run it: safe to retry
    fake.fail(503, times=1)
    changed = client(fake.url).call_service("light", "toggle", {"entity_id": "light.kitchen_ceiling"})
    assert [s.state for s in changed] == ["on"]
    assert len(fake.requests) == 3


def test_a_slow_house_times_out_within_the_deadline(fake: FakeHomeAssistant) -> None:
    # Given HA takes 5 s to answer
    fake.slow(5.0)
    ha = client(fake.url, timeout=0.4, deadline=1.0, attempts=5)
    # When the states are read
    started = time.monotonic()
    with pytest.raises(HAUnreachable) as raised:
        ha.states()
    elapsed = time.monotonic() - started
    # Then the call ends at its deadline, not after five times five seconds
    assert elapsed < 1.5
    # (the last attempt either timed out, or found too little time left to be made: under load, either)
    assert any(why in str(raised.value) for why in ("no answer within", "no time left before the deadline"))
    fake.healthy()


def test_a_bad_request_carries_HAs_message(fake: FakeHomeAssistant) -> None:
    with pytest.raises(HABadRequest) as raised:
        client(fake.url).render_template("{{ states('sensor.home_power') | nope }}")
    assert "No filter named 'nope'" in str(raised.value)


def test_a_missing_endpoint_says_so() -> None:
    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(404, text="404: Not Found")

    ha = RestHomeAssistant("http://ha.local:8123", TOKEN, transport=httpx2.MockTransport(answer))
    with pytest.raises(HAError, match="has no GET /api/logbook"):
        ha.logbook(FACTS.start, FACTS.now)


def test_an_answer_that_is_not_what_HA_sends_is_HAError() -> None:
    def answer(request: httpx2.Request) -> httpx2.Response:
        if request.url.path.endswith("/states"):
            return httpx2.Response(200, text="<html>captive portal</html>")
        return httpx2.Response(200, json={"entity_id": "sensor.x"})  # no state, no times

    ha = RestHomeAssistant("http://ha.local:8123", TOKEN, transport=httpx2.MockTransport(answer))
    with pytest.raises(HAError, match="not JSON"):
        ha.states()
    with pytest.raises(HAError, match="unexpected answer"):
        ha.state("sensor.x")


def test_the_token_is_sent_as_a_bearer_and_read_from_its_provider_each_time() -> None:
    seen: list[str] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers["Authorization"])
        return httpx2.Response(200, json=[])

    tokens = iter(["first-token", "rotated-token"])
    ha = RestHomeAssistant(
        "https://ha.example.org/api/", token_provider=lambda: next(tokens), transport=httpx2.MockTransport(answer)
    )
    assert ha.base_url == "https://ha.example.org/"  # "/api" is not doubled
    ha.states()
    ha.states()
    assert seen == ["Bearer first-token", "Bearer rotated-token"]


def test_a_failing_token_provider_is_HAError_without_details() -> None:
    def provider() -> str:
        raise RuntimeError("AccessDenied reading arn:aws:secretsmanager:eu-west-1:1:secret:ha")

    ha = RestHomeAssistant("http://ha.local:8123", token_provider=provider)
    with pytest.raises(HAError, match="could not read the access token") as raised:
        ha.states()
    assert "RuntimeError" in str(raised.value)


def test_the_token_never_appears_in_errors_or_logs(fake: FakeHomeAssistant, caplog: pytest.LogCaptureFixture) -> None:
    # Given every logger records everything
    caplog.set_level(logging.DEBUG)
    errors: list[BaseException] = []
    ha = client(fake.url, attempts=2, timeout=0.3, deadline=1.0)
    # When each kind of failure happens
    for trouble in ("500", "429", "slow", "template", "unknown", "service"):
        fake.healthy()
        if trouble == "500":
            fake.fail(500, times=10)
        elif trouble == "429":
            fake.fail(429, times=10, retry_after=0)
        elif trouble == "slow":
            fake.slow(2.0)
        try:
            if trouble == "template":
                ha.render_template("{{ '" + TOKEN + "' | float }}")  # HA echoes the failing input
            elif trouble == "unknown":
                ha.state("sensor.nope")
            elif trouble == "service":
                ha.call_service("light", "explode", {"entity_id": TOKEN})
            else:
                ha.states()
        except HAError as exc:
            errors.append(exc)
    fake.healthy()
    for bad in ("http://127.0.0.1:1", f"http://127.0.0.1:{closed_port()}"):
        try:
            client(bad, attempts=2).states()
        except HAError as exc:
            errors.append(exc)
    try:
        client(fake.url, token="wrong-" + TOKEN).states()
    except HAError as exc:
        errors.append(exc)
    # Then nine errors were raised, none of which shows the token, and no log record holds it
    assert len(errors) == 9
    for error in errors:
        assert TOKEN not in shown(error), shown(error)
    assert caplog.records, "the retries were logged"
    for record in caplog.records:
        assert TOKEN not in record.getMessage()
        assert TOKEN not in repr(record.args)
    assert TOKEN not in caplog.text
    assert repr(ha) == f"RestHomeAssistant('{fake.url}/')"
