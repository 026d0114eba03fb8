"""Credentials never survive into a stored or returned error: the redaction function and the places
that store or answer errors (envelope errors, events, terminal reasons, a Step Functions Cause, the
API's error shape, the OpenAI provider's own errors)."""

from __future__ import annotations

import json
import string
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from missions.core.mission.envelope import Envelope
from missions.core.mission.events import Event, EventType
from missions.core.redaction import REDACTED, forget_secret, redact, remember_secret

KEY = "sk-proj-Zq8Xv2Lr9Tn4Wb7Kc1Hd6Fj3Mp5Sg0Ye"


@pytest.fixture
def known_key() -> Iterator[str]:
    """A secret value the runtime read (the OpenAI key from settings or Secrets Manager)."""
    value = "Zq8Xv2Lr9Tn4-an-opaque-key-without-a-prefix"
    remember_secret(value)
    yield value
    forget_secret(value)


# -- shapes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"Incorrect API key provided: {KEY}.", KEY),
        ("Incorrect API key provided: sk-proj-abcd************************wxyz.", "abcd****"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbm4ifQ.c2lnbmF0dXJl", "eyJhbGciOiJIUzI1NiJ9"),
        ("header authorization=Basic YW5uOmh1bnRlcjI=", "YW5uOmh1bnRlcjI"),
        ("The security token AKIAIOSFODNN7EXAMPLE is invalid", "AKIAIOSFODNN7EXAMPLE"),
        ("temporary ASIAY34FZKBOKMUTVV7A expired", "ASIAY34FZKBOKMUTVV7A"),
        ("GET /v1/x?token=tok_8f2a9c&page=2 failed", "tok_8f2a9c"),
        ("login password=hunter2hunter2 refused", "hunter2hunter2"),
        ('bad config {"api_key": "my key with spaces"}', "my key with spaces"),
        ("bad config {'client_secret': 'c-123456'}", "c-123456"),
        ("x-api-key: 0123456789abcdef refused", "0123456789abcdef"),
        ("source secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw is wrong", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
        ("git fetch https://ann:p4ssw0rd-123@git.example.com/r.git: 403", "p4ssw0rd-123"),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
    ],
)
def test_each_credential_shape_is_removed(text: str, secret: str):
    # Given an error quoting a credential / When redacted / Then the credential is gone, the rest stays
    cleaned = redact(text)
    assert secret not in cleaned and REDACTED in cleaned
    assert cleaned.split()[0] == text.split()[0]


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens=4096 is more than the model allows",
        "no such file: task-list-12345678.md",
        "see risk-assessment-document for details",
        "model gpt-4o-mini rejected the request (HTTP 400): context length exceeded",
        "arn:aws:states:us-east-1:123456789012:execution:m:x failed",
        "the tokens were counted: 1200",
        "",
    ],
)
def test_ordinary_error_text_is_left_alone(text: str):
    assert redact(text) == text


def test_a_secret_the_runtime_knows_is_removed_wherever_it_appears(known_key: str):
    # Given a key without any recognisable shape, which the runtime read
    # When an error quotes it, even glued to other words / Then it is gone
    assert known_key not in redact(f"refused key={known_key}")
    assert known_key not in redact(f"refused{known_key}glued")
    assert redact("the key is " + known_key) == f"the key is {REDACTED}"


def test_short_values_are_not_treated_as_secrets():
    remember_secret("abc")
    try:
        assert redact("abc def") == "abc def"
    finally:
        forget_secret("abc")


# -- properties ------------------------------------------------------------------------------

_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=80)
_TOKEN = st.text(alphabet=string.ascii_letters + string.digits, min_size=20, max_size=48)
_DELIMITERS = st.sampled_from([" ", "\n", ": ", "'", '"', "(", "[", "{", "=", ", ", "\t", " -- "])


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    secret=st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=8, max_size=64),
    before=_TEXT,
    after=_TEXT,
)
def test_a_known_secret_never_survives_anywhere_in_a_message(secret: str, before: str, after: str):
    # Given any secret value the runtime knows, embedded anywhere in any message
    assume(REDACTED not in secret and secret not in REDACTED)
    # When the message is redacted / Then the secret is not in it (however the text around it looks)
    assert secret not in redact(before + secret + after, [secret])


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.sampled_from(
        [
            "sk-{t}",
            "sk-proj-{t}",
            "Bearer {t}",
            "bearer {t}",
            "AKIA{u}",
            "ASIA{u}",
            "whsec_{t}",
            "password={t}",
            "token={t}",
            "api_key={t}",
            '"api_key": "{t}"',
            "?access_token={t}&x=1",
            "https://user:{t}@example.com/",
        ]
    ),
    token=_TOKEN,
    upper=st.text(alphabet=string.ascii_uppercase + string.digits, min_size=16, max_size=16),
    before=_TEXT,
    after=_TEXT,
    left=_DELIMITERS,
    right=_DELIMITERS,
)
def test_a_credential_shape_never_survives_in_a_message(
    shape: str, token: str, upper: str, before: str, after: str, left: str, right: str
):
    # Given a credential of a known shape, set off from arbitrary text by a delimiter
    secret = upper if "{u}" in shape else token
    assume(secret not in before + after)
    message = before + left + shape.format(t=token, u=upper) + right + after
    # When the message is redacted / Then the credential's secret part is not in it
    assert secret not in redact(message)


@given(text=_TEXT)
def test_redaction_is_idempotent(text: str):
    once = redact(text)
    assert redact(once) == once


# -- where errors are stored -----------------------------------------------------------------


def test_an_envelope_error_is_stored_without_the_key():
    envelope = Envelope(capability="shopping", raw_input="goal", user_id="ann")
    envelope.record_error("intent", "LLMError", f"HTTP 401: Incorrect API key provided: {KEY}")
    assert KEY not in envelope.errors[0].message and "HTTP 401" in envelope.errors[0].message


def test_an_events_error_fields_are_stored_without_the_key():
    event = Event(
        type=EventType.FLOW_ERROR,
        mission_id="m_1",
        payload={"error": "LLMError", "message": f"refused {KEY}", "cause": f"Bearer {KEY}", "count": 2},
    )
    assert KEY not in json.dumps(event.payload) and event.payload["count"] == 2
    # and one read back from a store (validated again) is unchanged
    assert Event.model_validate(event.model_dump()).payload == event.payload


def test_a_step_functions_cause_is_absorbed_without_the_key():
    from missions.service.runner._absorb import cause_of as _cause

    cause = json.dumps({"errorMessage": f"Incorrect API key provided: {KEY}", "errorType": "LLMError"})
    assert KEY not in _cause(cause) and KEY not in _cause(f"raw {KEY}")


def test_a_terminal_reason_is_written_without_the_key():
    from missions.adapters.memory.missions import MemoryMissionStore
    from missions.core.mission.status import MissionStatus
    from missions.ports.missions import MissionRecord
    from missions.service.lifecycle import Lifecycle

    missions = MemoryMissionStore()
    missions.create(MissionRecord(mission_id="m_1", user_id="ann", capability="shopping", goal="g", status="queued"))
    Lifecycle(missions).move("m_1", MissionStatus.FAILED, terminal_reason=f"start_failed: bad key {KEY}")
    reason = missions.get("m_1").terminal_reason
    assert reason is not None and KEY not in reason and reason.startswith("start_failed")


def test_an_api_error_message_is_answered_without_the_key():
    from missions.app.resolver import error_body

    body = error_body(503, f"the model refused {KEY}", [{"loc": ["body"], "type": "x", "message": f"Bearer {KEY}"}])
    assert KEY not in json.dumps(body)


def test_a_domain_error_quoting_a_key_reaches_the_client_without_it(monkeypatch: pytest.MonkeyPatch):
    from missions.app.api import edge
    from missions.core.errors import DependencyUnavailable
    from missions.local.devserver import http_event
    from missions.local.moto import LocalContext
    from tests.support.fakes import memory_runtime

    # Given a dependency whose refusal quotes a key
    runtime = memory_runtime()

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise DependencyUnavailable(f"Secrets Manager refused: api_key={KEY}")

    monkeypatch.setattr(runtime.repository_service, "list", refuse)
    # When a route meets it
    result = edge.handle(http_event("GET", "/repositories", "", {}, b"", "ann"), LocalContext("missions-api"), runtime)
    # Then the 503 says what failed, without the key
    assert result["statusCode"] == 503 and KEY not in result["body"] and "Secrets Manager refused" in result["body"]


def test_the_openai_provider_never_raises_its_own_key():
    from missions.adapters.llm.openai_provider import OpenAIProvider
    from missions.core.llm.provider import LLMError, LLMRequest
    from tests.support.models.fake_openai import FakeOpenAI, error_body

    opaque = "an-opaque-key-0123456789"  # no recognisable shape: only the provider knows it is the key
    with FakeOpenAI() as server:
        server.enqueue(status=401, body=error_body(401, f"Incorrect API key provided: {opaque}"))
        provider = OpenAIProvider(api_key=opaque, base_url=server.base_url, sleep=lambda _s: None)
        request = LLMRequest(
            stage="intent", role="intent", messages=[{"role": "user", "content": "hi"}], output_model=Event
        )
        with pytest.raises(LLMError) as caught:
            provider.complete(request)
    assert opaque not in str(caught.value) and "HTTP 401" in str(caught.value)


def test_a_webhook_sources_secret_is_known_to_redaction():
    from missions.ports.webhooks import WebhookSource

    secret = "whsec_" + "b3BhcXVlLXdlYmhvb2sta2V5LWJ5dGVz"
    WebhookSource("ci", secret)
    try:
        assert "b3BhcXVlLXdlYmhvb2sta2V5LWJ5dGVz" not in redact("bad secret b3BhcXVlLXdlYmhvb2sta2V5LWJ5dGVz")
    finally:
        forget_secret(secret)
        forget_secret(secret.removeprefix("whsec_"))
