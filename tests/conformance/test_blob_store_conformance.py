"""Blob stores (missions.core.mission.offload's), in memory and on DynamoDB in moto: a backend conforms when it behaves
exactly like the in-memory reference adapter."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from missions.core.specs import BLOB_INLINE_LIMIT, CHECKPOINTS

if TYPE_CHECKING:
    from tests.conformance.conftest import Moto


@dataclass
class Backend:
    name: str
    blobs: Any
    s3: Any = None
    bucket: str = ""


@pytest.fixture(params=["memory", "dynamodb"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "memory":
        from missions.adapters.memory.blobs import MemoryBlobStore

        yield Backend("memory", MemoryBlobStore())
        return
    from missions.adapters.dynamodb.blobs import DynamoBlobStore

    aws: Moto = request.getfixturevalue("aws")
    blobs = DynamoBlobStore(aws.table(CHECKPOINTS), aws.bucket, client=aws.ddb, s3_client=aws.s3)
    yield Backend("dynamodb", blobs, aws.s3, aws.bucket)


def _key(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_blob_small_round_trip(backend):
    data = b"x\x00\xff" * 100
    key = _key(data)
    backend.blobs.put(key, data)
    backend.blobs.put(key, data)  # same key, same content: harmless
    assert backend.blobs.get(key) == data


def test_blob_large_round_trip(backend):
    data = os.urandom(400 * 1024)  # incompressible and over DynamoDB's item cap
    key = _key(data)
    backend.blobs.put(key, data)
    backend.blobs.put(key, data)
    assert backend.blobs.get(key) == data
    if backend.name == "dynamodb":
        obj = backend.s3.get_object(Bucket=backend.bucket, Key=f"blobs/{key[:2]}/{key}")
        assert obj["Body"].read() == data


def test_blob_at_inline_limit_stays_inline(backend):
    data = os.urandom(BLOB_INLINE_LIMIT)
    key = _key(data)
    backend.blobs.put(key, data)
    assert backend.blobs.get(key) == data
    if backend.name == "dynamodb":
        listed = backend.s3.list_objects_v2(Bucket=backend.bucket)
        assert listed.get("KeyCount", 0) == 0


def test_blob_missing(backend):
    with pytest.raises(KeyError):
        backend.blobs.get(_key(b"never written"))
