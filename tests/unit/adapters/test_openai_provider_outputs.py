"""What OpenAIProvider asks for and gets back: structured outputs, repaired JSON, the json_object fallback,
streaming, and an llm package that imports no openai. OpenAIProvider against a real local OpenAI-compatible
server, through the real openai SDK.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from missions.adapters.llm.openai_provider import OpenAIProvider
from missions.core.llm.provider import InvalidOutput, LLMError, LLMProvider, TransientLLMError
from tests.support.models.fake_openai import error_body
from tests.support.models.openai_provider import VALID, Verdict, make_provider, request

REPO = Path(__file__).resolve().parents[3]


def test_provider_satisfies_the_protocol(fake, sleeps):
    # Given a provider
    provider = make_provider(fake, sleeps)
    # Then it is an LLMProvider named "openai"
    assert isinstance(provider, LLMProvider)
    assert provider.name == "openai"


def test_structured_output_is_parsed(fake, sleeps):
    # Given a server that answers with schema-conforming JSON
    fake.enqueue(content=VALID)
    provider = make_provider(fake, sleeps)

    # When a structured completion is requested
    result = provider.complete(request())

    # Then the output is the validated pydantic model, unrepaired, from one call
    assert result.output == Verdict(answer="yes", confidence=0.9)
    assert result.repaired is False
    assert result.model == "gpt-4o-mini"
    assert len(fake.requests) == 1
    assert sleeps == []


def test_request_carries_json_schema_and_the_role_model(fake, sleeps):
    # Given a provider routing the "judge" role to its own model
    fake.enqueue(content=VALID).enqueue(content=VALID)
    provider = make_provider(fake, sleeps, models={"judge": "gpt-4.1-mini"})

    # When a judge request with sampling options and a role-less default request are made
    provider.complete(request(temperature=0.2, max_tokens=300))
    provider.complete(request(role="writer"))

    # Then the judge request names its model and asks for the output model's JSON schema
    judge, writer = fake.requests
    assert judge["model"] == "gpt-4.1-mini"
    assert judge["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Verdict", "schema": Verdict.model_json_schema(), "strict": False},
    }
    assert judge["messages"] == [{"role": "user", "content": "Is the claim supported?"}]
    assert judge["temperature"] == 0.2 and judge["max_tokens"] == 300
    assert fake.request_headers[0]["authorization"] == "Bearer test-key"
    # And other roles use the default model, without a temperature they did not set, and with the
    # provider's output ceiling for the limit they did not set (every call is bounded)
    assert writer["model"] == "gpt-4o-mini"
    assert "temperature" not in writer and writer["max_tokens"] == 4096


def test_an_injected_client_is_used(fake, sleeps):
    # Given an openai client built by the caller
    client = openai.OpenAI(api_key="test-key", base_url=fake.base_url, timeout=5.0, max_retries=0)
    fake.enqueue(content=VALID)
    provider = OpenAIProvider(client=client, sleep=sleeps.append)

    # When it completes
    result = provider.complete(request())

    # Then the call went through that client to the server
    assert result.output.answer == "yes"
    assert len(fake.requests) == 1


@pytest.mark.parametrize(
    "content",
    [
        f"```json\n{VALID}\n```",
        f"Sure! Here is my verdict:\n```json\n{VALID}\n```\nLet me know if you need more.",
        f"The verdict is {VALID} as requested.",
        '{"answer": "yes", "confidence": 0.9,}',
        "{'answer': 'yes', 'confidence': 0.9}",
    ],
    ids=["fence", "prose-and-fence", "prose", "trailing-comma", "single-quotes"],
)
def test_json_wrapped_in_prose_or_fences_is_repaired(fake, sleeps, content):
    # Given a model that wraps or mangles its JSON
    fake.enqueue(content=content)
    provider = make_provider(fake, sleeps)

    # When the answer is parsed
    result = provider.complete(request())

    # Then it is repaired, validated and flagged as repaired
    assert result.output == Verdict(answer="yes", confidence=0.9)
    assert result.repaired is True


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("I am sorry, I cannot judge this claim.", "Verdict"),
        ('{"answer": "yes"}', "confidence"),
        ('{"answer": "yes", "confidence": "very"}', "confidence"),
    ],
    ids=["prose-only", "missing-field", "wrong-type"],
)
def test_irreparable_content_raises_llm_error(fake, sleeps, content, problem):
    # Given a model whose answer cannot be made to fit the schema
    fake.enqueue(content=content)
    provider = make_provider(fake, sleeps)

    # When it is parsed
    with pytest.raises(LLMError) as caught:
        provider.complete(request())

    # Then a non-transient LLMError explains the validation problem, and nothing is retried
    assert not isinstance(caught.value, TransientLLMError)
    assert "not a valid Verdict" in str(caught.value)
    assert problem in str(caught.value)
    assert len(fake.requests) == 1
    # and it is an InvalidOutput, carrying the answer, its errors and what the call cost, for the stage to ask again
    invalid = caught.value
    assert isinstance(invalid, InvalidOutput) and invalid.content == content and invalid.errors
    assert invalid.spent is not None and invalid.spent.model == "gpt-4o-mini" and invalid.spent.tokens_in > 0


def test_json_schema_rejection_falls_back_to_json_object(fake, sleeps):
    # Given a server that rejects response_format json_schema but supports JSON mode
    rejection = error_body(
        400,
        "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
        param="response_format",
    )
    fake.enqueue(status=400, body=rejection)
    fake.enqueue(content=VALID)
    fake.enqueue(content=VALID)
    provider = make_provider(fake, sleeps)

    # When a completion is requested
    result = provider.complete(request())

    # Then it retried once in JSON mode with the schema in a system message
    assert result.output == Verdict(answer="yes", confidence=0.9)
    first, second = fake.requests
    assert first["response_format"]["type"] == "json_schema"
    assert second["response_format"] == {"type": "json_object"}
    system = second["messages"][0]
    assert system["role"] == "system" and "JSON schema" in system["content"]
    assert json.dumps(Verdict.model_json_schema(), separators=(",", ":")) in system["content"]
    assert second["messages"][1:] == first["messages"]
    assert sleeps == []

    # And the next request for that model goes straight to JSON mode
    provider.complete(request())
    assert fake.requests[2]["response_format"] == {"type": "json_object"}


def test_json_object_rejection_is_final(fake, sleeps):
    # Given a server rejecting both structured-output modes
    for _ in range(2):
        fake.enqueue(status=400, body=error_body(400, "bad response_format", param="response_format"))
    provider = make_provider(fake, sleeps)

    # When a completion is requested
    with pytest.raises(LLMError):
        provider.complete(request())

    # Then JSON mode was tried only once
    assert len(fake.requests) == 2


def test_importing_the_llm_package_does_not_import_openai():
    # Given a fresh interpreter with the runtime on its path
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'shared'}{os.pathsep}{REPO}"}

    # When the LLM core and the scripted provider are imported
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import missions.core.llm.provider, missions.adapters.llm.scripted, sys;"
            " assert 'openai' not in sys.modules",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    # Then the openai SDK was not loaded
    assert completed.returncode == 0, completed.stderr


def _sse(*chunks: dict) -> bytes:
    return b"".join(f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks) + b"data: [DONE]\n\n"


def _chunk(content: str | None = None, usage: dict | None = None) -> dict:
    choices = [] if content is None else [{"index": 0, "delta": {"content": content}, "finish_reason": None}]
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4o-mini", "choices": choices}
    return {**chunk, "usage": usage} if usage else chunk


def test_a_streamed_answer_goes_to_on_text_as_it_comes_and_is_validated_whole():
    import httpx2

    # Given streaming on, and an endpoint that streams the answer in three pieces, then its usage (recorded SSE)
    seen: list[dict] = []

    def serve(http_request: httpx2.Request) -> httpx2.Response:
        seen.append(json.loads(http_request.content))
        body = _sse(
            _chunk('{"answer": '),
            _chunk('"yes", "confid'),
            _chunk('ence": 0.9}'),
            _chunk(usage={"prompt_tokens": 120, "completion_tokens": 12, "total_tokens": 132}),
        )
        return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})

    client = openai.OpenAI(
        api_key="k",
        base_url="http://model.test/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(serve)),
        max_retries=0,
    )
    pieces: list[str] = []
    # When a stage asks, taking the text as it comes
    result = OpenAIProvider(client=client, stream=True, sleep=lambda s: None).complete(request(on_text=pieces.append))
    # Then each piece reached on_text in order, the whole is the validated output, and the usage is counted
    assert pieces == ['{"answer": ', '"yes", "confid', 'ence": 0.9}']
    assert result.output == Verdict(answer="yes", confidence=0.9)
    assert (result.tokens_in, result.tokens_out) == (120, 12)
    assert seen[0]["stream"] is True and seen[0]["stream_options"] == {"include_usage": True}


def _completion(content: str, finish_reason: str, completion_tokens: int) -> dict:
    """A chat.completion as llama.cpp's server sends it (recorded: Gemma 3 270M at its output limit)."""
    usage = {"prompt_tokens": 984, "completion_tokens": completion_tokens, "total_tokens": 984 + completion_tokens}
    choice = {"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", "content": content}}
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "gemma", "choices": [choice], "usage": usage}


def test_an_answer_cut_off_at_the_output_limit_fails_instead_of_being_repaired_into_a_valid_one(fake, sleeps):
    # Given a server whose answer stopped at the output limit, its JSON unclosed (closing it would make a
    # valid Verdict: the JSON repair alone would take it as the whole answer)
    fake.enqueue(body=_completion('{"answer": "yes, because the evidence shows that', "length", 384))
    provider = make_provider(fake, sleeps)
    # When a stage asks with an output limit
    with pytest.raises(LLMError) as caught:
        provider.complete(request(max_tokens=384))
    # Then the call fails, saying the answer was cut off at the limit, and is not retried; it is an invalid
    # answer (the stage's repair asks for a shorter one) whose tokens were generated and are paid for
    assert isinstance(caught.value, InvalidOutput) and caught.value.spent is not None
    assert (caught.value.spent.tokens_in, caught.value.spent.tokens_out) == (984, 384)
    assert "cut off at the output limit (384 tokens, max_tokens 384)" in str(caught.value)
    assert len(fake.requests) == 1


def test_an_answer_that_ended_by_itself_is_taken(fake, sleeps):
    # Given the same server's answer that stopped on its own (finish_reason "stop")
    fake.enqueue(body=_completion(VALID, "stop", 12))
    # When a stage asks
    result = make_provider(fake, sleeps).complete(request(max_tokens=384))
    # Then it is the output, with the server's token counts
    assert result.output == Verdict(answer="yes", confidence=0.9)
    assert (result.tokens_in, result.tokens_out) == (984, 12)


def test_a_streamed_answer_cut_off_at_the_output_limit_fails():
    import httpx2

    # Given streaming on, and a stream whose last choice chunk says finish_reason "length" (no limit asked:
    # the server's own stopped it)
    def serve(http_request: httpx2.Request) -> httpx2.Response:
        cut = _chunk('", "confid')
        cut["choices"][0]["finish_reason"] = "length"
        usage = {"prompt_tokens": 120, "completion_tokens": 256, "total_tokens": 376}
        body = _sse(_chunk('{"answer": "yes'), cut, _chunk(usage=usage))
        return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})

    client = openai.OpenAI(
        api_key="k",
        base_url="http://model.test/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(serve)),
        max_retries=0,
    )
    provider = OpenAIProvider(client=client, stream=True, sleep=lambda s: None)
    # When a stage asks, taking the text as it comes
    with pytest.raises(LLMError) as caught:
        provider.complete(request(on_text=lambda piece: None))
    # Then the call fails for being cut off at the server's limit
    assert "cut off at the output limit (256 tokens, the server's limit)" in str(caught.value)


def _probed(routes: dict[str, tuple[int, dict]]) -> tuple[OpenAIProvider, list[str]]:
    """A provider whose endpoint answers GET paths from `routes` (status, JSON), and the paths it was asked."""
    import httpx2

    asked: list[str] = []

    def serve(http_request: httpx2.Request) -> httpx2.Response:
        asked.append(http_request.url.path)
        status, body = routes.get(http_request.url.path, (404, {"error": {"message": "File Not Found"}}))
        return httpx2.Response(status, json=body)

    client = openai.OpenAI(
        api_key="k",
        base_url="http://model.test/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(serve)),
        max_retries=0,
    )
    return OpenAIProvider(client=client, sleep=lambda s: None), asked


def test_the_probe_of_a_server_without_the_model_route_lists_its_models():
    # Given llama.cpp's server (its answers recorded): no GET /v1/models/{model} (404 "File Not Found",
    # type not_found_error), its one model listed under its file's name, whatever a request names
    listed = {"object": "list", "data": [{"id": "gemma-3-270m-q4_k_m.gguf", "object": "model", "owned_by": "llamacpp"}]}
    provider, asked = _probed({"/v1/models": (200, listed)})
    # When GET /ready probes the model
    provider.probe()
    # Then the endpoint is ready: it answered the list of its models
    assert asked == ["/v1/models/gpt-4o-mini", "/v1/models"]


def test_the_probe_of_a_model_the_server_does_not_know_fails():
    # Given OpenAI's own answer for a model it does not have
    unknown = {"error": {"message": "The model `gpt-4o-mini` does not exist", "code": "model_not_found"}}
    provider, asked = _probed({"/v1/models/gpt-4o-mini": (404, unknown)})
    # When it is probed, Then the probe fails naming the model, without asking for the list
    with pytest.raises(LLMError, match="gpt-4o-mini: HTTP 404"):
        provider.probe()
    assert asked == ["/v1/models/gpt-4o-mini"]
