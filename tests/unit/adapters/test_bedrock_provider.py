"""BedrockProvider: Converse through botocore's Stubber, ConverseStream through recorded event-stream
frames parsed by botocore itself; the retries, fallback and breaker are the ones every provider shares."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import ANY, Stubber
from pydantic import BaseModel

from missions.adapters.llm.bedrock_provider import BedrockProvider, converse_params
from missions.core.cost.pricing import cost_usd
from missions.core.llm.provider import LLMError, LLMProvider, LLMRequest, Probed, TransientLLMError
from tests.support.models.recorded_llm import bedrock_stream_body, converse_response, serve_bedrock

MODEL = "amazon.nova-lite-v1:0"
FALLBACK = "us.anthropic.claude-haiku-4-5-20251001-v1:0"


class Verdict(BaseModel):
    answer: str
    confidence: float


def request(**overrides) -> LLMRequest:
    options = dict(
        stage="review",
        role="judge",
        messages=[
            {"role": "system", "content": "You judge claims."},
            {"role": "user", "content": "Is the claim supported?"},
            {"role": "user", "content": "Evidence: none."},
        ],
        output_model=Verdict,
        temperature=0.2,
    )
    options.update(overrides)
    return LLMRequest(**options)


@pytest.fixture
def client():
    return boto3.client("bedrock-runtime", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s")


def provider(client, sleeps: list[float] | None = None, **options) -> BedrockProvider:
    slept = sleeps if sleeps is not None else []
    return BedrockProvider(client=client, default_model=MODEL, sleep=slept.append, **options)


def test_a_converse_tool_call_is_the_validated_output_with_its_usage_and_cost(client):
    # Given Bedrock answering the forced tool call, as Converse does
    stubber = Stubber(client)
    expected = converse_params(MODEL, request())
    stubber.add_response("converse", converse_response({"answer": "no", "confidence": 0.8}, 120, 40), expected)
    with stubber:
        # When a stage asks / Then the tool input is the output, priced from Converse's usage
        result = provider(client).complete(request())
    stubber.assert_no_pending_responses()
    assert result.output == Verdict(answer="no", confidence=0.8) and not result.repaired
    assert (result.model, result.tokens_in, result.tokens_out) == (MODEL, 120, 40)
    assert result.cost_usd == cost_usd(MODEL, 120, 40) > 0
    # and the request forced the one tool, with the system prompt apart and the user's turns joined
    assert expected["toolConfig"]["toolChoice"] == {"tool": {"name": "Verdict"}}
    assert expected["system"] == [{"text": "You judge claims."}]
    assert [len(turn["content"]) for turn in expected["messages"]] == [2]
    assert isinstance(provider(client), LLMProvider) and isinstance(provider(client), Probed)


def test_throttling_is_retried_with_backoff_then_a_validation_error_is_final(client):
    # Given a throttled first attempt, then an answer
    stubber = Stubber(client)
    stubber.add_client_error("converse", "ThrottlingException", "Too many requests", 429)
    stubber.add_response(
        "converse",
        converse_response({"answer": "yes", "confidence": 1}),
        {"modelId": MODEL, **{k: ANY for k in ("messages", "system", "inferenceConfig", "toolConfig")}},
    )
    sleeps: list[float] = []
    with stubber:
        # When a stage asks / Then it waited once (the shared backoff) and got its answer
        assert provider(client, sleeps).complete(request()).output.answer == "yes"  # type: ignore[attr-defined]
    assert sleeps == [0.5]
    # Given a request Bedrock refuses / Then no retry: an LLMError naming the code
    stubber = Stubber(client)
    stubber.add_client_error("converse", "ValidationException", "The model does not support tool use", 400)
    with stubber, pytest.raises(LLMError) as refused:
        provider(client, sleeps).complete(request())
    assert "ValidationException" in str(refused.value) and not isinstance(refused.value, TransientLLMError)
    assert sleeps == [0.5]


def test_a_busy_primary_hands_over_to_the_fallback_and_the_breaker_opens_after_repeated_failures(client):
    # Given the primary model unavailable on every attempt and the fallback answering
    stubber = Stubber(client)
    for _ in range(2):
        stubber.add_client_error("converse", "ServiceUnavailableException", "busy", 503)
    stubber.add_response("converse", converse_response({"answer": "maybe", "confidence": 0.5}))
    sleeps: list[float] = []
    bedrock = provider(client, sleeps, max_retries=1, fallback_model=FALLBACK, breaker_threshold=1)
    with stubber:
        # When a stage asks / Then the fallback's answer is priced as the fallback (an inference profile)
        result = bedrock.complete(request())
    assert (result.model, result.output.answer) == (FALLBACK, "maybe")  # type: ignore[attr-defined]
    assert result.cost_usd == cost_usd("anthropic.claude-haiku-4-5", 100, 30)
    # Given both failing / Then a transient error, and the open breaker fails the next call without a request
    stubber = Stubber(client)
    for _ in range(4):
        stubber.add_client_error("converse", "ThrottlingException", "slow down", 429)
    with stubber:
        with pytest.raises(TransientLLMError, match="fallback model"):
            bedrock.complete(request())
        with pytest.raises(TransientLLMError, match="circuit open"):
            bedrock.complete(request())
    stubber.assert_no_pending_responses()


def test_with_on_text_the_answer_streams_in_pieces_through_converse_stream(client):
    # Given ConverseStream answering in three pieces (recorded event-stream frames, parsed by botocore)
    answer = {"answer": "streamed", "confidence": 0.7}
    seen = serve_bedrock(
        client,
        lambda body: (200, {"content-type": "application/vnd.amazon.eventstream"}, bedrock_stream_body(answer, 90, 25)),
    )
    pieces: list[str] = []
    # When a stage asks with on_text
    result = provider(client).complete(request(on_text=pieces.append))
    # Then each piece was handed over as it came, and the whole is the output with the stream's usage
    assert len(pieces) == 3 and "".join(pieces) == '{"answer": "streamed", "confidence": 0.7}'
    assert result.output == Verdict(**answer) and (result.tokens_in, result.tokens_out) == (90, 25)
    assert seen[0]["toolConfig"]["toolChoice"] == {"tool": {"name": "Verdict"}}


def test_readiness_asks_the_control_plane_for_the_foundation_model(client):
    # Given a control plane that knows the model behind an inference profile
    control = boto3.client("bedrock", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s")
    stubber = Stubber(control)
    stubber.add_response(
        "get_foundation_model",
        {
            "modelDetails": {
                "modelArn": "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-haiku-4-5-20251001-v1:0",
                "modelId": "anthropic.claude-haiku-4-5-20251001-v1:0",
            }
        },
        {"modelIdentifier": "anthropic.claude-haiku-4-5-20251001-v1:0"},
    )
    stubber.add_client_error("get_foundation_model", "AccessDeniedException", "not allowed", 403)
    bedrock = BedrockProvider(client=client, control_client=control, default_model=FALLBACK)
    with stubber:
        bedrock.probe()  # Then it answered
        with pytest.raises(LLMError, match="AccessDeniedException"):  # and a refusal is not ready
            bedrock.probe()
