"""Embedders: the offline hashing one is stable and meaningful; the OpenAI one speaks the real API."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from missions.adapters.embeddings import HashingEmbedder, OpenAIEmbedder, cosine, text_of
from missions.ports.memory import Embedder
from tests.support.models.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parents[3]
TEXTS = ["vegetarian restaurants near me", "Car insurance renewal", "ünïcödé straße", ""]


# --------------------------------------------------------------------------- HashingEmbedder


def test_hashing_embedder_is_deterministic_across_processes():
    # Given vectors computed here
    here = HashingEmbedder(64).embed(TEXTS)
    # When another interpreter (another PYTHONHASHSEED) computes them
    code = (
        "import json, sys\n"
        "from missions.adapters.embeddings import HashingEmbedder\n"
        "print(json.dumps(HashingEmbedder(64).embed(json.loads(sys.argv[1]))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, json.dumps(TEXTS)],
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT / 'shared'}:{ROOT}", "PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    # Then they are identical
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == here


def test_hashing_embedder_vectors_are_unit_length_or_zero():
    embedder = HashingEmbedder()
    assert isinstance(embedder, Embedder)
    vectors = embedder.embed(TEXTS)
    assert all(len(v) == 256 for v in vectors)
    for vector in vectors[:3]:
        assert math.sqrt(sum(x * x for x in vector)) == pytest.approx(1.0)
    assert vectors[3] == [0.0] * 256  # no words, no direction
    assert embedder.embed([]) == []


def test_similar_texts_score_higher_than_dissimilar_ones():
    query, food, car = HashingEmbedder().embed(
        ["vegetarian food", "vegetarian restaurants near me", "car insurance renewal"]
    )
    assert cosine(query, food) > cosine(query, car)
    assert cosine(query, food) > 0.2


def test_case_and_word_forms_still_match():
    # Sub-word trigrams make "Restaurant" close to "restaurants"
    a, b, c = HashingEmbedder().embed(["Restaurant", "restaurants", "insurance"])
    assert cosine(a, b) > 0.35 > cosine(a, c)


def test_dimensions_must_be_positive():
    with pytest.raises(ValueError):
        HashingEmbedder(0)


# --------------------------------------------------------------------------- helpers


def test_cosine_bounds_and_edge_cases():
    assert cosine([1.0, 0.0], [1.0, 0.0]) == pytest.approx(1.0)
    assert cosine([1.0, 0.0], [-1.0, 0.0]) == pytest.approx(-1.0)
    assert cosine([1.0, 0.0], [0.0, 1.0]) == 0.0
    assert cosine([0.0, 0.0], [1.0, 0.0]) == 0.0
    with pytest.raises(ValueError):
        cosine([1.0], [1.0, 0.0])


def test_text_of_flattens_keys_and_strings():
    value = {"diet": "vegetarian", "likes": ["thai food", {"city": "Paris"}], "age": 42, "ok": True, "n": None}
    assert text_of(value) == "diet vegetarian likes thai food city Paris age ok n"
    assert text_of("plain") == "plain"
    assert text_of(3.5) == ""


# --------------------------------------------------------------------------- OpenAIEmbedder


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        yield server


def test_openai_embedder_sends_model_and_dimensions_and_keeps_order(fake):
    # Given an embedder pointed at the fake API
    embedder = OpenAIEmbedder(api_key="test-key", base_url=fake.base_url, model="text-embedding-3-small", dimensions=8)
    # When it embeds texts
    vectors = embedder.embed(["alpha", "beta", "gamma"])
    # Then one request carried the model, the dimensions and the inputs in order
    [request] = fake.embedding_requests
    assert request["model"] == "text-embedding-3-small"
    assert request["dimensions"] == 8
    assert request["input"] == ["alpha", "beta", "gamma"]
    # And the vectors are the server's, in input order
    assert vectors == [FakeOpenAI.embedding_of(t, 8) for t in ["alpha", "beta", "gamma"]]
    assert fake.requests == []  # the chat completion queue is untouched


def test_openai_embedder_skips_blank_texts(fake):
    # Given blank texts among real ones (the API refuses empty inputs)
    embedder = OpenAIEmbedder(api_key="test-key", base_url=fake.base_url, dimensions=4)
    vectors = embedder.embed(["", "word", "  "])
    # Then only the real text is sent, and blanks get the zero vector
    assert [r["input"] for r in fake.embedding_requests] == [["word"]]
    assert vectors[0] == vectors[2] == [0.0] * 4
    assert vectors[1] == pytest.approx(FakeOpenAI.embedding_of("word", 4))
    assert embedder.embed(["", " "]) == [[0.0] * 4, [0.0] * 4]
    assert len(fake.embedding_requests) == 1


def test_openai_embedder_accepts_an_injected_client(fake):
    import openai

    client = openai.OpenAI(api_key="test-key", base_url=fake.base_url, max_retries=0)
    embedder = OpenAIEmbedder(client=client, model="custom-embedder", dimensions=16)
    [vector] = embedder.embed(["hello"])
    assert len(vector) == 16
    assert fake.embedding_requests[0]["model"] == "custom-embedder"


def test_openai_embedder_refuses_vectors_of_the_wrong_size():
    def create(**kwargs):  # an endpoint that ignores `dimensions`
        return SimpleNamespace(
            data=[SimpleNamespace(index=i, embedding=[0.1] * 3) for i in range(len(kwargs["input"]))]
        )

    client = SimpleNamespace(embeddings=SimpleNamespace(create=create))
    with pytest.raises(ValueError, match="3 dimensions, not 8"):
        OpenAIEmbedder(client=client, dimensions=8).embed(["x"])


def test_openai_embedder_without_a_key_fails_clearly(monkeypatch):
    from missions.core.llm.provider import LLMError

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LLMError, match="cannot create the OpenAI client"):
        OpenAIEmbedder()


def test_importing_the_embedders_does_not_import_openai():
    code = (
        "import sys\n"
        "import missions.adapters.embeddings, missions.adapters.memory.longterm, missions.adapters.dynamodb.longterm\n"
        "assert 'openai' not in sys.modules\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT / 'shared'}:{ROOT}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_the_fake_also_answers_the_sdk_default_base64_encoding(fake):
    import openai

    client = openai.OpenAI(api_key="test-key", base_url=fake.base_url, max_retries=0)
    response = client.embeddings.create(model="text-embedding-3-small", input="hello", dimensions=4)
    assert response.data[0].embedding == pytest.approx(FakeOpenAI.embedding_of("hello", 4), abs=1e-6)


def test_openai_embedder_says_what_the_server_answered_when_it_fails():
    import httpx2
    import openai

    from missions.core.errors import DependencyUnavailable

    # Given an OpenAI-compatible server without embeddings (llama.cpp's server started without --embeddings,
    # its answer recorded)
    def serve(request: httpx2.Request) -> httpx2.Response:
        message = "This server does not support embeddings. Start it with `--embeddings`"
        return httpx2.Response(501, json={"error": {"code": 501, "message": message, "type": "not_supported_error"}})

    client = openai.OpenAI(
        api_key="sk-test-0123456789abcdefghij",
        base_url="http://model.test/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(serve)),
        max_retries=0,
    )
    # When texts are embedded
    with pytest.raises(DependencyUnavailable) as caught:
        OpenAIEmbedder(client=client, dimensions=4).embed(["kitchen light"])
    # Then the mission's error says the status and the server's reason, not only the SDK's class name, and
    # the setting that embeds without the server
    assert str(caught.value) == (
        "the embedding service failed: InternalServerError: Error code: 501 - "
        "This server does not support embeddings. Start it with `--embeddings` "
        "(a server without embeddings: set embeddings to local, MISSIONS_EMBEDDINGS=local)"
    )
