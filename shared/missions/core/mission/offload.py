"""Keeping the envelope small in transit.

Step Functions state is capped at 256 KB and missions can hold megabytes. When an encoded
envelope passes `threshold` bytes, its bulkiest fields are compressed into a blob store
(content-addressed within their mission, so unchanged fields are written once) and replaced by
references. `decode` resolves them again, so stages never see the difference.

A blob's key is "<mission id>/<sha256 of its content>" (`blob_key`): it belongs to one mission, so
erasing a user's missions finds every blob they wrote (missions.service.accounts), and never one another
mission shares. References written before blobs were scoped are a bare hash; they still resolve.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from typing import Any, Protocol

import pydantic_core

from missions.core.mission.checkpoints import detached
from missions.core.mission.envelope import INLINE_FIELDS, Envelope

DEFAULT_THRESHOLD = 24 * 1024
PACK_THRESHOLD = 1024  # a Parallel or Map result holds one per branch or item: keep each tiny
REF_KEY = "$ref"
# top-level fields that may move out besides each agent output, bulkiest first
MOVABLE_FIELDS = ("context", "state", "branch_results", "citations", "answers", "errors")
# fields envelopes encoded by earlier versions carried and this one drops when it decodes them (an
# execution in flight across a deploy): the stages' history now lives in the checkpoints
RETIRED_FIELDS = ("history",)


class BlobStore(Protocol):
    def put(self, key: str, data: bytes) -> None: ...

    def get(self, key: str) -> bytes: ...


def blob_key(scope: str, raw: bytes) -> str:
    """The key of a blob of `raw` written for the mission `scope`: "<mission id>/<sha256>"."""
    return f"{scope}/{hashlib.sha256(raw).hexdigest()}"


def blob_scope(key: str) -> str | None:
    """The mission a blob key belongs to; None for a key written before blobs were scoped."""
    scope, separator, _ = key.rpartition("/")
    return scope if separator else None


class BlobMissing(LookupError):
    """A reference points to a blob that does not exist (expired or never written)."""


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


class EnvelopeCodec:
    """Encodes envelopes for transit, offloading bulky fields to a blob store, and decodes them back."""

    def __init__(self, blobs: BlobStore, threshold: int = DEFAULT_THRESHOLD):
        self.blobs = blobs
        self.threshold = threshold
        self._known: set[str] = set()  # blobs this process already wrote or read

    def encode(self, envelope: Envelope) -> dict[str, Any]:
        data = envelope.model_dump(mode="json")
        data["refs"] = {}
        # most envelopes are far below the threshold: pydantic-core's JSON (compact, in C) sizes them several
        # times faster than the text the blobs are made of, which escapes non-ASCII: at most 3x longer (a 2-byte
        # UTF-8 character is 6 characters there), so a third of the threshold is safely below it
        if len(pydantic_core.to_json(data)) < self.threshold // 3:
            return data
        if len(_dumps(data)) <= self.threshold:
            return data
        candidates: list[tuple[int, tuple[str, ...]]] = []
        for name, value in data["outputs"].items():
            candidates.append((len(_dumps(value)), ("outputs", name)))
        for name in MOVABLE_FIELDS:
            if name not in INLINE_FIELDS and data.get(name):
                candidates.append((len(_dumps(data[name])), (name,)))
        size = len(_dumps(data))
        for field_size, path in sorted(candidates, reverse=True):
            if size <= self.threshold:
                break
            if field_size < 256:
                continue
            value = _get(data, path)
            raw = _dumps(value).encode()
            key = blob_key(envelope.mission_id, raw)
            if key not in self._known:
                self.blobs.put(key, zlib.compress(raw, 6))
                self._known.add(key)
            ref = {REF_KEY: key, "bytes": len(raw)}
            _set(data, path, [] if isinstance(value, list) else {})
            data["refs"][".".join(path)] = key
            size -= field_size - len(_dumps(ref))
        return data

    def pack(self, value: dict[str, Any], scope: str) -> dict[str, Any]:
        """Store a whole value (a branch's delta) as one blob of the mission `scope` when it is too big
        to travel."""
        raw = _dumps(value).encode()
        if len(raw) <= PACK_THRESHOLD:
            return value
        key = blob_key(scope, raw)
        if key not in self._known:
            self.blobs.put(key, zlib.compress(raw, 6))
            self._known.add(key)
        return {REF_KEY: key, "bytes": len(raw)}

    def unpack(self, value: Any) -> Any:
        if isinstance(value, dict) and set(value) == {REF_KEY, "bytes"}:
            return json.loads(self._load(value[REF_KEY], "packed value"))
        return value

    def _load(self, key: str, what: str) -> bytes:
        try:
            raw = zlib.decompress(self.blobs.get(key))
        except KeyError as exc:
            raise BlobMissing(f"{what} (blob {key}) is missing") from exc
        self._known.add(key)
        return raw

    def decode(self, data: dict[str, Any], detach: bool = False) -> Envelope:
        """The envelope `data` encodes; with `detach` it shares nothing with `data` (what the stage changes
        in place cannot change `data`). Most envelopes offload nothing: those are validated straight from
        their JSON, which makes fresh values without a copy first."""
        if detach:
            if not data.get("refs") and not any(retired in data for retired in RETIRED_FIELDS):
                return Envelope.model_validate_json(
                    pydantic_core.to_json({k: v for k, v in data.items() if k != "refs"}, inf_nan_mode="constants")
                )
            data = detached(data)
        data = dict(data)
        refs = data.pop("refs", None) or {}
        for retired in RETIRED_FIELDS:
            data.pop(retired, None)
            if retired in refs:
                refs = {dotted: key for dotted, key in refs.items() if dotted != retired}
        if refs:
            data["outputs"] = dict(data.get("outputs") or {})
        for dotted, key in refs.items():
            raw = self._load(key, f"offloaded field '{dotted}'")
            _set(data, tuple(dotted.split(".", 1)), json.loads(raw))
        return Envelope.model_validate(data)


def _get(data: dict[str, Any], path: tuple[str, ...]) -> Any:
    return data[path[0]] if len(path) == 1 else data[path[0]][path[1]]


def _set(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    if len(path) == 1:
        data[path[0]] = value
    else:
        data[path[0]][path[1]] = value


def encoded_size(data: dict[str, Any]) -> int:
    return len(_dumps(data))
