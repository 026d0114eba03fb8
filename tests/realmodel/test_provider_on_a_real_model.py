"""The OpenAI provider against llama.cpp's own server, one call at a time: a streamed structured answer (the
`openai_stream` setting), whose usage comes in the stream's last chunk, and an answer the server stops at a
request's max_tokens. What the missions do with these is tests/realmodel/test_missions_on_a_real_model.py."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from missions.adapters.llm.openai_provider import OpenAIProvider
from missions.core.llm.provider import LLMError, LLMRequest

pytestmark = pytest.mark.realmodel


class Dinner(BaseModel):
    cuisine: str
    party_size: int


def ask(max_tokens: int, on_text=None) -> LLMRequest:
    messages = [
        {"role": "system", "content": "You turn a request for a restaurant into search criteria."},
        {"role": "user", "content": "An Italian dinner for two, please."},
    ]
    return LLMRequest("plan", "planner", messages, Dinner, temperature=0.0, max_tokens=max_tokens, on_text=on_text)


def test_a_streamed_structured_answer_arrives_in_pieces_with_its_usage(wire):
    # Given the provider streaming from llama.cpp's server (it wants no key), through the recording proxy
    proxy, base_url = wire
    provider = OpenAIProvider(api_key="none", base_url=base_url, stream=True, first_token_seconds=300.0)
    pieces: list[str] = []
    mark = proxy.mark()
    # When a stage asks for a structured answer, taking the text as it comes
    result = provider.complete(ask(64, pieces.append))
    # Then the pieces make the answer, which the server's grammar held to the schema, and the server's usage
    # (its stream's last chunk, asked with stream_options include_usage) is the result's
    [exchange] = proxy.since(mark)
    assert exchange.request["stream"] is True and exchange.request["stream_options"] == {"include_usage": True}
    assert exchange.request["response_format"]["type"] == "json_schema"
    [usage] = [chunk["usage"] for chunk in exchange.answer if chunk.get("usage")]
    assert len(pieces) > 1 and Dinner.model_validate_json("".join(pieces)) == result.output
    assert (result.tokens_in, result.tokens_out) == (usage["prompt_tokens"], usage["completion_tokens"])
    assert result.tokens_in > 0 and result.tokens_out > 0 and result.cost_usd > 0


def test_an_answer_the_server_stops_at_max_tokens_fails_saying_so(wire):
    # Given the provider on llama.cpp's server
    proxy, base_url = wire
    provider = OpenAIProvider(api_key="none", base_url=base_url, first_token_seconds=300.0)
    mark = proxy.mark()
    # When a stage allows 3 tokens, too few for any Dinner
    with pytest.raises(LLMError) as caught:
        provider.complete(ask(3))
    # Then the server stopped at the limit (finish_reason "length"), and the call fails saying so
    [exchange] = proxy.since(mark)
    assert exchange.request["max_tokens"] == 3
    assert exchange.answer["choices"][0]["finish_reason"] == "length"
    assert "cut off at the output limit (3 tokens, max_tokens 3)" in str(caught.value)
