"""The envelope model and the codec that keeps it small in transit."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from missions.adapters.memory.blobs import MemoryBlobStore
from missions.core.mission.envelope import (
    INLINE_FIELDS,
    Bounds,
    Citation,
    Counters,
    Envelope,
    Interrupt,
    InterruptKind,
    InterruptResponse,
)
from missions.core.mission.offload import (
    DEFAULT_THRESHOLD,
    PACK_THRESHOLD,
    REF_KEY,
    BlobMissing,
    EnvelopeCodec,
    blob_scope,
    encoded_size,
)

MB = 1024 * 1024


class CountingBlobs:
    """A BlobStore that records every put, to prove unchanged blobs are written once."""

    def __init__(self) -> None:
        self.inner = MemoryBlobStore()
        self.puts: list[str] = []

    def put(self, key: str, data: bytes) -> None:
        self.puts.append(key)
        self.inner.put(key, data)

    def get(self, key: str) -> bytes:
        return self.inner.get(key)


def envelope(**kwargs: Any) -> Envelope:
    return Envelope(capability="cap", raw_input="a goal", **kwargs)


def noise(size: int, seed: int = 0) -> str:
    """Text that does not compress to nothing (so sizes are honest), with JSON-escaped characters."""
    rng = random.Random(seed)
    alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789 \n"\\é€'
    return "".join(rng.choices(alphabet, k=size))


def big_envelope(size: int = 2 * MB) -> Envelope:
    return envelope(
        outputs={"reader": {"text": noise(size)}, "small": {"ok": True}},
        next_stage="writer",
        counters=Counters(llm_calls=3, agent_hops=4, tokens_in=100),
        interrupt=Interrupt(kind=InterruptKind.CHOICE, stage="reader", question="which?", options=["a", "b"]),
        citations=[Citation(file="a.py", line=3)],
    )


# -- the envelope ------------------------------------------------------------------------


def test_envelope_defaults():
    # When only the required fields are given
    env = envelope()
    # Then identity is generated and every counter starts at zero
    assert env.mission_id.startswith("m_") and env.request_id.startswith("req_")
    assert env.counters == Counters()
    assert env.bounds == Bounds(
        max_iterations=3, max_llm_calls=10, max_agent_hops=21, max_tool_calls=50, max_cost_usd=1.0
    )
    assert (env.next_stage, env.interrupt, env.failure, env.terminal_reason) == (None, None, None, None)
    assert env.outputs == {} and env.refs == {} and env.edge_counts == {}


def test_two_envelopes_get_distinct_ids():
    assert envelope().mission_id != envelope().mission_id


@pytest.mark.parametrize("model", [Envelope, Counters, Bounds, InterruptResponse])
def test_unknown_fields_are_rejected(model):
    base = {"capability": "cap", "raw_input": "g"} if model is Envelope else {}
    with pytest.raises(ValidationError, match="bogus"):
        model.model_validate({**base, "bogus": 1})


@pytest.mark.parametrize("bounds", [{"max_agent_hops": 1}, {"max_iterations": 0}, {"max_cost_usd": -1}])
def test_invalid_bounds_are_rejected(bounds: dict[str, Any]):
    with pytest.raises(ValidationError):
        Bounds(**bounds)


def test_raw_input_is_capped():
    with pytest.raises(ValidationError):
        Envelope(capability="cap", raw_input="x" * 100_001)


def test_add_citations_deduplicates_by_file_and_line():
    env = envelope()
    env.add_citations(
        [Citation(file="a.py", line=1), Citation(file="a.py", line=1, end_line=9), Citation(file="a.py", line=2)]
    )
    assert [c.ref for c in env.citations] == ["a.py:1", "a.py:2"]


# -- interrupt answers -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "answer", "options"),
    [
        (InterruptKind.CLARIFICATION, {"text": "the parser"}, None),
        (InterruptKind.CONFIRMATION, {"approved": True}, None),
        (InterruptKind.CONFIRMATION, {"approved": False}, None),
        (InterruptKind.AGENT_REVIEW, {"approved": True}, None),
        (InterruptKind.AGENT_REVIEW, {"decision": "revise"}, None),
        (InterruptKind.CHOICE, {"decision": "b"}, ["a", "b"]),
        (InterruptKind.CHOICE, {"decision": "anything"}, None),
    ],
)
def test_well_shaped_answers_pass(kind, answer, options):
    InterruptResponse(**answer).check_shape(kind, options)


@pytest.mark.parametrize(
    ("kind", "answer", "options", "message"),
    [
        (InterruptKind.CLARIFICATION, {}, None, "non-empty 'text'"),
        (InterruptKind.CLARIFICATION, {"text": "   "}, None, "non-empty 'text'"),
        (InterruptKind.CLARIFICATION, {"approved": True}, None, "non-empty 'text'"),
        (InterruptKind.CONFIRMATION, {"text": "yes"}, None, "'approved'"),
        (InterruptKind.AGENT_REVIEW, {"text": "looks fine"}, None, "'approved' or a 'decision'"),
        (InterruptKind.CHOICE, {}, ["a"], "'decision' naming one option"),
        (InterruptKind.CHOICE, {"decision": "c"}, ["a", "b"], "'c' is not one of the options"),
    ],
)
def test_badly_shaped_answers_are_refused_with_a_reason(kind, answer, options, message):
    with pytest.raises(ValueError, match=message):
        InterruptResponse(**answer).check_shape(kind, options)


# -- the codec ---------------------------------------------------------------------------


def test_small_envelope_travels_unchanged():
    # Given a small envelope
    env = envelope(outputs={"a": {"x": 1}})
    codec = EnvelopeCodec(CountingBlobs())
    # When
    encoded = codec.encode(env)
    # Then it is the plain dump with no references, and nothing was stored
    assert encoded == {**env.model_dump(mode="json"), "refs": {}}
    assert codec.blobs.puts == []
    assert codec.decode(encoded) == env


def test_two_megabyte_output_is_offloaded_and_restored_exactly():
    # Given a 2 MB output
    env = big_envelope()
    blobs = CountingBlobs()
    codec = EnvelopeCodec(blobs)
    # When
    encoded = codec.encode(env)
    # Then the encoded envelope fits the threshold and references the output
    assert encoded_size(encoded) <= DEFAULT_THRESHOLD
    assert encoded["outputs"]["reader"] == {}
    assert "outputs.reader" in encoded["refs"]
    assert len(json.dumps(encoded)) < DEFAULT_THRESHOLD + 1024
    # and decoding (even by another codec sharing the store) restores it exactly
    assert EnvelopeCodec(blobs).decode(encoded).model_dump() == env.model_dump()


def test_encode_does_not_mutate_the_envelope_and_decode_does_not_mutate_its_input():
    env = big_envelope(200_000)
    before = env.model_dump()
    codec = EnvelopeCodec(MemoryBlobStore())
    encoded = codec.encode(env)
    snapshot = json.loads(json.dumps(encoded))
    codec.decode(encoded)
    assert env.model_dump() == before
    assert encoded == snapshot


def test_inline_fields_never_move():
    # Given an envelope far over the threshold, with bulky inline fields too
    env = big_envelope()
    env.work_items = [noise(50_000, seed=1)]
    env.interrupt = Interrupt(kind=InterruptKind.CLARIFICATION, stage="reader", question=noise(30_000, seed=2))
    # When
    encoded = EnvelopeCodec(MemoryBlobStore(), threshold=4096).encode(env)
    # Then every field the state machine reads is still inline and identical
    dumped = env.model_dump(mode="json")
    for name in INLINE_FIELDS:
        assert encoded[name] == dumped[name], name
    assert not any(ref.split(".")[0] in INLINE_FIELDS for ref in encoded["refs"])
    assert encoded["bounds"] == dumped["bounds"]  # the ASL's guards read the bounds too


def test_unchanged_blobs_are_not_put_again():
    # Given a codec that already encoded a big envelope
    blobs = CountingBlobs()
    codec = EnvelopeCodec(blobs)
    env = big_envelope(300_000)
    codec.encode(env)
    assert len(blobs.puts) == 1
    # When the same envelope moves on with only small changes
    env.counters.agent_hops += 1
    env.next_stage = "other"
    codec.encode(env)
    # Then the big output is not written again
    assert len(blobs.puts) == 1
    # When a second big output appears, only that one is written
    env.outputs["second"] = {"text": noise(300_000, seed=9)}
    encoded = codec.encode(env)
    assert len(blobs.puts) == 2
    assert set(encoded["refs"]) == {"outputs.reader", "outputs.second"}


def test_a_codec_that_read_a_blob_does_not_write_it_back():
    # Given an envelope encoded by one codec (one Lambda) ...
    blobs = CountingBlobs()
    encoded = EnvelopeCodec(blobs).encode(big_envelope(300_000))
    # ... decoded and re-encoded by another (the next Lambda)
    other = EnvelopeCodec(blobs)
    other.encode(other.decode(encoded))
    # Then the blob was written once only
    assert len(blobs.puts) == 1


def test_pack_keeps_small_values_and_unpack_restores_big_ones():
    codec = EnvelopeCodec(MemoryBlobStore())
    small = {"stage": "b", "output": {"x": 1}}
    assert codec.pack(small, scope="m1") is small
    assert codec.unpack(small) is small
    big = {"stage": "b", "output": {"text": noise(PACK_THRESHOLD * 4)}}
    packed = codec.pack(big, scope="m1")
    assert set(packed) == {REF_KEY, "bytes"}
    assert encoded_size(packed) < PACK_THRESHOLD
    assert codec.unpack(packed) == big
    assert EnvelopeCodec(codec.blobs).unpack(packed) == big


def test_missing_blob_raises_blob_missing_naming_the_field():
    # Given an envelope encoded into one store
    encoded = EnvelopeCodec(MemoryBlobStore()).encode(big_envelope(300_000))
    # When decoded against an empty store
    with pytest.raises(BlobMissing, match="offloaded field 'outputs.reader'"):
        EnvelopeCodec(MemoryBlobStore()).decode(encoded)


def test_missing_packed_blob_raises_blob_missing():
    packed = EnvelopeCodec(MemoryBlobStore()).pack({"text": noise(5000)}, scope="m1")
    with pytest.raises(BlobMissing, match="packed value"):
        EnvelopeCodec(MemoryBlobStore()).unpack(packed)


def test_top_level_fields_move_when_outputs_are_not_enough():
    # Given a huge context and history but tiny outputs
    env = envelope(context={"doc": noise(100_000)}, outputs={"a": {"x": 1}})
    codec = EnvelopeCodec(MemoryBlobStore())
    # When
    encoded = codec.encode(env)
    # Then the context moved and comes back
    assert encoded["refs"].keys() == {"context"}
    assert encoded["context"] == {}
    assert codec.decode(encoded) == env


# -- property ----------------------------------------------------------------------------

OUTPUT_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True)
# (size, seed): the text is built from a seeded generator, so examples stay cheap
OUTPUT_TEXT = st.tuples(st.integers(0, 200_000), st.integers(0, 2**32 - 1))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    outputs=st.dictionaries(OUTPUT_NAMES, OUTPUT_TEXT, max_size=6),
    nested=st.booleans(),
    threshold=st.sampled_from([4 * 1024, DEFAULT_THRESHOLD]),
)
def test_encode_decode_is_identity_and_size_stays_bounded(outputs, nested, threshold):
    # Given random outputs up to ~200 KB each
    values: dict[str, Any] = {}
    for name, (size, seed) in outputs.items():
        text = noise(size, seed)
        values[name] = {"text": text, "meta": {"n": size}} if nested else text
    env = envelope(outputs=values, counters=Counters(agent_hops=len(values)))
    codec = EnvelopeCodec(MemoryBlobStore(), threshold=threshold)
    # When
    encoded = codec.encode(env)
    # Then it survives JSON transit and decodes to the same envelope
    decoded = EnvelopeCodec(codec.blobs).decode(json.loads(json.dumps(encoded)))
    assert decoded.model_dump() == env.model_dump()
    # and stays under the threshold, give or take the references themselves
    assert encoded_size(encoded) <= threshold + 2048


def test_an_envelope_that_carried_its_history_still_decodes_without_it():
    # Given envelopes encoded before the history left the envelope: inline, and offloaded to a blob
    blobs = MemoryBlobStore()
    codec = EnvelopeCodec(blobs)
    record = {"stage": "a", "started_at": "2026-01-01T00:00:00.000+00:00", "duration_ms": 1.0, "status": "ok"}
    inline = {**codec.encode(envelope(next_stage="b")), "history": [record]}
    offloaded = {**codec.encode(envelope(next_stage="b")), "history": []}
    offloaded["refs"] = {"history": "ab" * 32}  # (its blob need not even exist any more)
    # When an execution in flight hands them to a stage of this version
    # Then they decode, the history dropped (each checkpoint keeps its stage's record now)
    for old in (inline, offloaded):
        decoded = codec.decode(old)
        assert decoded.next_stage == "b" and "history" not in decoded.model_dump()


def test_blobs_belong_to_their_mission_and_legacy_refs_still_resolve():
    # Given two missions offloading the very same bulky output
    blobs = MemoryBlobStore()
    codec = EnvelopeCodec(blobs, threshold=2048)
    first, second = big_envelope(), big_envelope()
    second.mission_id = "m-other"
    # When both are encoded
    refs = [codec.encode(env)["refs"] for env in (first, second)]
    # Then each mission's blob is its own, named by its mission (an erasure of one never touches the other)
    assert all(
        key.startswith(f"{env.mission_id}/") for env, r in zip((first, second), refs, strict=True) for key in r.values()
    )
    assert {blob_scope(k) for k in blobs.items} == {first.mission_id, "m-other"}
    # And a reference written before blobs were scoped (a bare hash) still resolves
    legacy = {dotted: key.rpartition("/")[2] for dotted, key in refs[0].items()}
    for key in refs[0].values():
        blobs.items[key.rpartition("/")[2]] = blobs.items[key]
    encoded = codec.encode(first)
    encoded["refs"] = legacy
    assert blob_scope(next(iter(legacy.values()))) is None
    assert EnvelopeCodec(blobs).decode(encoded).model_dump() == first.model_dump()
