"""One conformance suite for the repository store: in memory (the reference) and DynamoDB in moto."""

from __future__ import annotations

import threading

import pytest

from missions.adapters.memory.repositories import MemoryRepositoryStore
from missions.core.errors import ConflictError, NotFound
from missions.core.specs import REPOSITORIES
from missions.ports.repositories import RepositoryRecord, RepositorySnapshot
from tests.support.aws import FAKE_AWS_ENV, SerializedClient

REGION = "us-east-1"


@pytest.fixture(params=["memory", "dynamodb"])
def store(request, monkeypatch):
    if request.param == "memory":
        yield MemoryRepositoryStore()
        return
    import boto3
    from moto import mock_aws

    from missions.adapters.dynamodb.repositories import DynamoRepositoryStore
    from missions.adapters.dynamodb.tables import table_definition

    for key, value in FAKE_AWS_ENV.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        client.create_table(**table_definition(REPOSITORIES, "test-repositories"))
        yield DynamoRepositoryStore("test-repositories", client=SerializedClient(client))


def record(repository_id: str, owner: str = "ada", created_at: str = "2026-01-01T00:00:00.000+00:00", **fields):
    return RepositoryRecord(
        repository_id=repository_id,
        owner=owner,
        name=fields.pop("name", repository_id),
        source=fields.pop("source", "git"),
        created_at=created_at,
        **fields,
    )


def snapshot(sha: str, **fields) -> RepositorySnapshot:
    return RepositorySnapshot(sha256=sha * 64 if len(sha) == 1 else sha, files=3, total_bytes=10, **fields)


def test_create_get_and_duplicate(store):
    store.create(record("r_1", url="https://example.com/x.git"))
    got = store.get("r_1")
    assert got.owner == "ada" and got.url == "https://example.com/x.git" and got.status == "importing"
    with pytest.raises(ConflictError):
        store.create(record("r_1"))
    with pytest.raises(NotFound):
        store.get("r_missing")


def test_list_for_owner_is_newest_first_and_only_theirs(store):
    store.create(record("r_1", created_at="2026-01-01T00:00:00.000+00:00"))
    store.create(record("r_2", created_at="2026-01-02T00:00:00.000+00:00"))
    store.create(record("r_3", owner="bob"))
    store.create(record("r_4", owner="#shared"))
    assert [r.repository_id for r in store.list_for_owner("ada")] == ["r_2", "r_1"]
    assert [r.repository_id for r in store.list_for_owner("#shared")] == ["r_4"]
    assert store.list_for_owner("nobody") == []


def test_update_with_a_status_guard(store):
    store.create(record("r_1", status="awaiting_upload"))
    updated = store.update("r_1", expect_status="awaiting_upload", status="importing")
    assert updated.status == "importing" and store.get("r_1").status == "importing"
    with pytest.raises(ConflictError):
        store.update("r_1", expect_status="awaiting_upload", status="importing")
    store.update("r_1", status="failed", reason="bad archive")
    assert store.get("r_1").reason == "bad archive"
    store.update("r_1", reason=None)
    assert store.get("r_1").reason is None
    with pytest.raises(NotFound):
        store.update("r_missing", status="ready")


def test_snapshots_are_appended_once_and_make_the_repository_ready(store):
    store.create(record("r_1", status="importing", reason="earlier failure"))
    store.add_snapshot("r_1", snapshot("a", commit="c" * 40, ref="main"))
    store.add_snapshot("r_1", snapshot("b", ref="v1"))
    got = store.add_snapshot("r_1", snapshot("a", commit="c" * 40, ref="main"))  # the same content again
    stored = store.get("r_1")
    assert [s.sha256[0] for s in stored.snapshots] == ["b", "a"] == [s.sha256[0] for s in got.snapshots]
    assert stored.status == "ready" and stored.reason is None
    assert stored.snapshots[-1].commit == "c" * 40


def test_concurrent_imports_lose_no_snapshot(store):
    store.create(record("r_1"))
    threads = [threading.Thread(target=store.add_snapshot, args=("r_1", snapshot(c))) for c in "abcd"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(s.sha256[0] for s in store.get("r_1").snapshots) == list("abcd")


def test_delete(store):
    store.create(record("r_1"))
    store.delete("r_1")
    with pytest.raises(NotFound):
        store.get("r_1")
    with pytest.raises(NotFound):
        store.delete("r_1")
    with pytest.raises(NotFound):
        store.add_snapshot("r_1", snapshot("a"))
