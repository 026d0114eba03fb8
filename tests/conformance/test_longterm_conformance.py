"""One conformance suite for every long-term memory backend: in memory, and DynamoDB in moto.

Every case runs against each backend; a backend conforms when it behaves exactly like the
in-memory reference adapter.
"""

from __future__ import annotations

import time

import pytest

from missions.adapters.memory.longterm import InMemoryLongTermMemory
from missions.core.errors import MemoryValidationError
from missions.core.memory.longterm import MAX_VALUE_BYTES, PREFERENCES
from missions.core.specs import MEMORY

REGION = "us-east-1"
TABLE = "test-memory"
NS = ("notes",)


@pytest.fixture(params=["memory", "dynamodb"])
def memory(request, monkeypatch):
    if request.param == "memory":
        yield InMemoryLongTermMemory()
        return

    import boto3
    from moto import mock_aws

    from missions.adapters.dynamodb.longterm import DynamoLongTermMemory
    from missions.adapters.dynamodb.tables import table_definition

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        ddb.create_table(**table_definition(MEMORY, TABLE))
        yield DynamoLongTermMemory(TABLE, client=ddb)


# --------------------------------------------------------------------------- put / get / delete


def test_put_then_get_returns_the_value(memory):
    # Given a stored item
    stored = memory.put("alice", NS, "k1", {"text": "hello", "n": 1.5, "tags": ["a", "b"], "ok": True, "none": None})
    # When it is read back
    item = memory.get("alice", NS, "k1")
    # Then it carries the same value and identity
    assert item is not None
    assert item.value == {"text": "hello", "n": 1.5, "tags": ["a", "b"], "ok": True, "none": None}
    assert (item.user_id, item.namespace, item.key) == ("alice", ["notes"], "k1")
    assert item.created_at == stored.created_at == item.updated_at


def test_values_come_back_as_json_gives_them(memory):
    # Given values JSON can hold, including scalars and non-string-keyed dicts
    memory.put("alice", NS, "num", 42)
    memory.put("alice", NS, "tup", {"pair": (1, 2), 3: "x"})
    # Then they come back as a JSON round trip gives them
    assert memory.get("alice", NS, "num").value == 42
    assert memory.get("alice", NS, "tup").value == {"pair": [1, 2], "3": "x"}


def test_get_of_a_missing_item_is_none(memory):
    assert memory.get("alice", NS, "nothing") is None


def test_replace_keeps_created_at_and_bumps_updated_at(memory):
    # Given an item
    first = memory.put("alice", NS, "k1", {"v": 1})
    time.sleep(0.005)  # timestamps have millisecond resolution
    # When it is replaced
    second = memory.put("alice", NS, "k1", {"v": 2})
    # Then created_at is kept, updated_at moves forward and the value is the new one
    item = memory.get("alice", NS, "k1")
    assert second.created_at == item.created_at == first.created_at
    assert item.updated_at == second.updated_at > first.updated_at
    assert item.value == {"v": 2}


def test_a_conditional_put_lands_only_on_what_the_writer_read(memory):
    from missions.core.errors import ConflictError

    # Given an item a writer read
    seen = memory.put("u1", ["prefs"], "likes", {"value": ["jazz"]})
    # When another writer changes it first
    memory.put("u1", ["prefs"], "likes", {"value": ["jazz", "folk"]})
    # Then the first writer's write is refused, and the item keeps the other's value
    with pytest.raises(ConflictError):
        memory.put_if_unchanged("u1", ["prefs"], "likes", {"value": ["jazz", "blues"]}, seen)
    current = memory.get("u1", ["prefs"], "likes")
    assert current.value == {"value": ["jazz", "folk"]}
    # And a write over what it read again lands
    memory.put_if_unchanged("u1", ["prefs"], "likes", {"value": ["jazz", "folk", "blues"]}, current)
    assert memory.get("u1", ["prefs"], "likes").value == {"value": ["jazz", "folk", "blues"]}
    # And "it was absent" is a condition too: refused once the item exists, taken while it does not
    with pytest.raises(ConflictError):
        memory.put_if_unchanged("u1", ["prefs"], "likes", {"value": []}, None)
    assert memory.put_if_unchanged("u1", ["prefs"], "dislikes", {"value": ["noise"]}, None).key == "dislikes"


def test_delete_reports_whether_something_was_deleted(memory):
    # Given an item
    memory.put("alice", NS, "k1", "x")
    # When it is deleted twice / Then only the first delete found it
    assert memory.delete("alice", NS, "k1") is True
    assert memory.delete("alice", NS, "k1") is False
    assert memory.get("alice", NS, "k1") is None


def test_delete_then_put_starts_a_new_created_at(memory):
    # Given an item deleted and written again later
    first = memory.put("alice", NS, "k1", "x")
    memory.delete("alice", NS, "k1")
    time.sleep(0.005)
    second = memory.put("alice", NS, "k1", "y")
    # Then it is a new item
    assert second.created_at > first.created_at


# --------------------------------------------------------------------------- list


def test_list_returns_one_namespace_only_sorted_by_key(memory):
    # Given items in a namespace, a sub-namespace and a sibling namespace
    for key in ("b", "a", "c"):
        memory.put("alice", ("notes",), key, key)
    memory.put("alice", ("notes", "work"), "w", "w")
    memory.put("alice", ("notesx",), "x", "x")
    # When the namespace is listed / Then only its own items come, in key order
    assert [i.key for i in memory.list("alice", ("notes",))] == ["a", "b", "c"]
    assert [i.key for i in memory.list("alice", ("notes", "work"))] == ["w"]
    assert memory.list("alice", ("empty",)) == []


def test_list_honours_the_limit(memory):
    # Given more items than the limit
    for n in range(7):
        memory.put("alice", NS, f"k{n}", n)
    # Then the limit caps the result
    assert [i.key for i in memory.list("alice", NS, limit=3)] == ["k0", "k1", "k2"]
    assert len(memory.list("alice", NS)) == 7
    assert memory.list("alice", NS, limit=0) == []


# --------------------------------------------------------------------------- isolation


def test_users_never_see_each_others_items(memory):
    # Given alice's items
    memory.put("alice", NS, "secret", {"text": "vegetarian restaurants near me"})
    # Then bob, in the same namespace and key, sees nothing of them
    assert memory.get("bob", NS, "secret") is None
    assert memory.list("bob", NS) == []
    assert memory.search("bob", NS, "vegetarian restaurants") == []
    assert memory.delete("bob", NS, "secret") is False
    # And bob's own writes leave alice's untouched
    memory.put("bob", NS, "secret", "bob's")
    assert memory.get("alice", NS, "secret").value == {"text": "vegetarian restaurants near me"}
    assert [i.user_id for i in memory.list("bob", NS)] == ["bob"]


def test_a_user_id_prefix_is_not_another_user(memory):
    # Given users whose ids share a prefix
    memory.put("al", ("n",), "k", 1)
    memory.put("alice", ("n",), "k", 2)
    # Then each sees its own item only
    assert memory.get("al", ("n",), "k").value == 1
    assert [i.value for i in memory.list("alice", ("n",))] == [2]


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "namespace",
    [(), ("a", "b", "c", "d", "e"), ("has space",), ("slash/inside",), ("hash#inside",), ("",), ("x" * 65,), "notes"],
)
def test_bad_namespaces_are_refused(memory, namespace):
    with pytest.raises(MemoryValidationError):
        memory.put("alice", namespace, "k", 1)
    with pytest.raises(MemoryValidationError):
        memory.list("alice", namespace)


@pytest.mark.parametrize("key", ["", "has space", "a/b", "a#b", "x" * 65])
def test_bad_keys_are_refused(memory, key):
    with pytest.raises(MemoryValidationError):
        memory.put("alice", NS, key, 1)
    with pytest.raises(MemoryValidationError):
        memory.get("alice", NS, key)


@pytest.mark.parametrize("user_id", ["", "a#b"])
def test_bad_user_ids_are_refused(memory, user_id):
    with pytest.raises(MemoryValidationError, match="user id"):
        memory.put(user_id, NS, "k", 1)


def test_names_at_the_limits_are_accepted(memory):
    namespace = ("a", "b.c", "D_e-f", "x" * 64)
    memory.put("alice", namespace, "k" * 64, 1)
    assert memory.get("alice", namespace, "k" * 64).value == 1


def test_a_value_over_64_kb_is_refused_with_its_size(memory):
    # Given a value whose compact JSON is just over the limit
    too_big = "x" * (MAX_VALUE_BYTES - 1)  # plus the two quotes
    # Then it is refused, naming the size, and nothing is stored
    with pytest.raises(MemoryValidationError, match=str(MAX_VALUE_BYTES + 1)):
        memory.put("alice", NS, "big", too_big)
    assert memory.get("alice", NS, "big") is None
    # And a value of exactly the limit is fine
    memory.put("alice", NS, "max", "x" * (MAX_VALUE_BYTES - 2))
    assert len(memory.get("alice", NS, "max").value) == MAX_VALUE_BYTES - 2


def test_non_json_values_are_refused(memory):
    with pytest.raises(MemoryValidationError):
        memory.put("alice", NS, "k", {"when": object()})
    with pytest.raises(MemoryValidationError):
        memory.put("alice", NS, "k", float("nan"))


# --------------------------------------------------------------------------- search


def test_search_ranks_the_similar_item_first(memory):
    # Given two unrelated memories
    memory.put("alice", NS, "food", {"text": "vegetarian restaurants near me"})
    memory.put("alice", NS, "car", {"text": "car insurance renewal"})
    # When searching for food
    results = memory.search("alice", NS, "vegetarian food")
    # Then the food memory comes first, with cosine scores
    assert [item.key for item, _ in results] == ["food", "car"]
    scores = [score for _, score in results]
    assert all(-1.0 <= score <= 1.0 for score in scores)
    assert scores[0] > scores[1]
    assert results[0][0].value == {"text": "vegetarian restaurants near me"}


def test_search_stays_in_its_namespace_and_honours_the_limit(memory):
    # Given items in two namespaces
    for n in range(5):
        memory.put("alice", NS, f"k{n}", f"vegetarian note {n}")
    memory.put("alice", ("other",), "x", "vegetarian elsewhere")
    # Then a search sees only its namespace, capped by the limit
    results = memory.search("alice", NS, "vegetarian", limit=3)
    assert len(results) == 3
    assert all(item.namespace == ["notes"] for item, _ in results)
    assert memory.search("alice", ("empty",), "vegetarian") == []


def test_identical_text_scores_one(memory):
    memory.put("alice", NS, "k", "car insurance renewal")
    [(item, score)] = memory.search("alice", NS, "car insurance renewal")
    assert score == pytest.approx(1.0, abs=1e-6)
    assert score <= 1.0


@pytest.mark.parametrize("query", ["", "   "])
def test_an_empty_query_is_refused(memory, query):
    with pytest.raises(MemoryValidationError):
        memory.search("alice", NS, query)


# --------------------------------------------------------------------------- users_with


def test_users_with_lists_only_users_holding_items_under_that_head(memory):
    # Given preferences of two users, and other memories of a third
    memory.put("carol", (PREFERENCES, "carol"), "tone", "short answers")
    memory.put("alice", (PREFERENCES, "alice"), "tone", "detailed")
    memory.put("alice", (PREFERENCES, "alice", "digest"), "when", "mondays")
    memory.put("bob", ("notes",), "k", "x")
    memory.put("dave", (PREFERENCES + "_old",), "k", "x")
    # Then only the users with preferences are listed, once each, sorted
    assert memory.users_with(PREFERENCES) == ["alice", "carol"]
    assert memory.users_with("notes") == ["bob"]
    assert memory.users_with("nothing") == []
    # And a user whose last item there is deleted is no longer listed
    memory.delete("carol", (PREFERENCES, "carol"), "tone")
    assert memory.users_with(PREFERENCES) == ["alice"]
