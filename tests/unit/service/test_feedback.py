"""Feedback on finished missions: learnings per capability, preferences per user, complaints."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import ValidationError

from missions.adapters.dynamodb.learnings import DynamoLearningsStore
from missions.adapters.llm.scripted import ScriptedProvider
from missions.adapters.memory.events import MemoryEventStore
from missions.adapters.memory.learnings import InMemoryLearningsStore
from missions.adapters.memory.longterm import InMemoryLongTermMemory
from missions.adapters.memory.missions import MemoryMissionStore
from missions.core.errors import ConflictError, NotFound
from missions.core.llm.provider import LLMError, LLMRequest, LLMResult
from missions.core.memory.preferences import Preference, PreferenceExtraction, offline_preference_policy
from missions.core.mission.events import Event, EventType
from missions.core.specs import LEARNINGS
from missions.ports.missions import MissionRecord
from missions.service.feedback import (
    FEEDBACK_COMPLAINT,
    FEEDBACK_RECEIVED,
    Feedback,
    apply_feedback,
    preferences_for,
    preferences_namespace,
)
from tests.support.aws import use_fake_aws

DINING = "great but too expensive for a weeknight, and I want more vegetarian options"


@dataclass
class World:
    missions: MemoryMissionStore
    learnings: InMemoryLearningsStore
    memory: InMemoryLongTermMemory
    events: MemoryEventStore

    def mission(self, mission_id: str = "m1", *, user: str = "alice", status: str = "completed", **extra: Any):
        record = MissionRecord(
            mission_id=mission_id,
            user_id=user,
            capability="dining",
            goal="plan dinners for the week",
            status=status,
            **extra,
        )
        self.missions.create(record)
        return self.missions.get(mission_id)

    def give(self, mission: MissionRecord, *, user: str = "alice", llm: Any = "offline", **fields: Any):
        return apply_feedback(
            mission=mission,
            user_id=user,
            feedback=Feedback(**fields),
            missions=self.missions,
            learnings=self.learnings,
            memory=self.memory,
            events=self.events,
            llm=ScriptedProvider(offline_preference_policy) if llm == "offline" else llm,
        )

    def snapshot(self) -> dict[str, Any]:
        return {
            "missions": {k: v.model_dump() for k, v in self.missions._items.items()},
            "learnings": self.learnings.get("dining").model_dump(),
            "preferences": preferences_for("alice", self.memory),
            "events": {k: self.events.read(k, limit=10_000)[0] for k in self.missions._items},
        }

    def stored_preference(self, key: str, user: str = "alice") -> dict[str, Any]:
        item = self.memory.get(user, preferences_namespace(user), key)
        assert item is not None, key
        return item.value


@pytest.fixture
def world() -> World:
    return World(MemoryMissionStore(), InMemoryLearningsStore(), InMemoryLongTermMemory(), MemoryEventStore())


def _extract(text: str, **hints: Any) -> dict[str, Any]:
    request = LLMRequest(
        stage="feedback", role="feedback", messages=[], output_model=PreferenceExtraction, hints={"text": text, **hints}
    )
    result = offline_preference_policy(request)
    return {"prefs": {p.key: p.value for p in result.preferences}, "complaint": result.complaint}


# --------------------------------------------------------------------------- preferences


def test_the_dining_sentence_yields_a_weeknight_budget_and_a_vegetarian_like(world):
    # Given a finished dining mission
    mission = world.mission()
    # When its owner says it was great but too expensive for a weeknight and wants more vegetarian options
    outcome = world.give(mission, quality=4, text=DINING)
    # Then both preferences are stored in the user's preferences namespace
    prefs = preferences_for("alice", world.memory)
    assert prefs["weeknight_budget"] == "lower"
    assert "vegetarian" in prefs.get("likes", []) + prefs.get("dietary_restrictions", [])
    assert set(outcome.preferences_written) >= {"weeknight_budget", "likes"}
    # And each item says where it came from and how sure we are
    stored = world.stored_preference("weeknight_budget")
    assert stored["value"] == "lower" and stored["source_mission"] == "m1"
    assert 0.5 <= stored["confidence"] <= 1 and stored["updated_at"]


def test_preferences_merge_across_feedbacks_lists_union_and_scalars_replaced(world):
    # Given a first feedback: shorter answers, more vegetarian options
    world.give(world.mission("m1"), text="Too long to read. I want more vegetarian options.")
    # When a second feedback on another mission asks for more detail and more fish (and vegetarian again)
    outcome = world.give(world.mission("m2"), text="Give me more detail. And more fish and Vegetarian dishes!")
    # Then the list holds each item once and the scalar took the newer value
    prefs = preferences_for("alice", world.memory)
    assert prefs["likes"] == ["vegetarian", "fish"]
    assert prefs["verbosity"] == "longer"
    assert world.stored_preference("likes")["source_mission"] == "m2"
    assert set(outcome.preferences_written) == {"likes", "verbosity"}


def test_a_new_dislike_takes_the_item_off_the_likes(world):
    # Given a user who loved the mushrooms
    world.give(world.mission("m1"), text="Loved the mushrooms and the pasta")
    # When they later say no more mushrooms
    world.give(world.mission("m2"), text="please, no more mushrooms")
    # Then mushrooms moved from likes to dislikes
    prefs = preferences_for("alice", world.memory)
    assert prefs["likes"] == ["pasta"] and prefs["dislikes"] == ["mushrooms"]


def test_preferences_for_returns_a_flat_dict_of_values(world):
    # Given stored preferences
    world.give(world.mission(), text="I'm vegan. Please cite sources, and it was too slow.")
    # When a mission reads them at start / Then it gets plain {key: value}
    assert preferences_for("alice", world.memory) == {
        "dietary_restrictions": ["vegan"],
        "wants_citations": True,
        "speed": "faster",
    }
    # And another user sees none of them
    assert preferences_for("bob", world.memory) == {}


def test_without_a_model_the_text_is_read_by_the_offline_rules(world):
    # Given the offline model / When feedback has text / Then the offline rules extract preferences
    outcome = world.give(world.mission(), text="too expensive", llm="offline")
    assert outcome.preferences_written == ["budget"]


def test_low_confidence_guesses_are_not_stored(world):
    # Given a model that is unsure about one preference
    def unsure(_: LLMRequest) -> PreferenceExtraction:
        return PreferenceExtraction(
            preferences=[
                Preference(key="Cuisine Style", value="thai", confidence=0.3),
                Preference(key="spice_level", value="mild", confidence=0.9),
            ]
        )

    # When feedback is applied
    outcome = world.give(world.mission(), text="hmm", llm=ScriptedProvider(unsure))
    # Then only the confident one is stored
    assert outcome.preferences_written == ["spice_level"]
    assert preferences_for("alice", world.memory) == {"spice_level": "mild"}


def test_the_model_gets_the_text_and_the_goal_as_a_feedback_request(world):
    # Given a provider that records what it is asked
    seen: list[LLMRequest] = []

    def recording(request: LLMRequest) -> PreferenceExtraction:
        seen.append(request)
        return offline_preference_policy(request)

    # When feedback with text is applied
    world.give(world.mission(), quality=2, text=DINING, llm=ScriptedProvider(recording))
    # Then one "feedback" request asked for a PreferenceExtraction from the text and the goal
    (request,) = seen
    assert (request.role, request.stage, request.output_model) == ("feedback", "feedback", PreferenceExtraction)
    prompt = "\n".join(m["content"] for m in request.messages)
    assert DINING in prompt and "plan dinners for the week" in prompt and "quality=2" in prompt


def test_a_failing_model_still_records_the_structured_part(world):
    # Given a model that fails
    class Broken:
        name = "broken"

        def complete(self, request: LLMRequest) -> LLMResult:
            raise LLMError("rate limited")

    # When feedback with a rating and text is applied
    outcome = world.give(world.mission(), quality=5, completed=True, text="lovely", llm=Broken())
    # Then the rating counts, the mission has its feedback, and the error is reported, not raised
    assert world.learnings.get("dining").rating_count == 1
    assert world.missions.get("m1").feedback["quality"] == 5
    assert outcome.extraction_error == "rate limited" and outcome.preferences_written == []


# --------------------------------------------------------------------------- the offline rules


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("It was pricey.", {"budget": "lower"}),
        ("over budget for weeknights", {"weeknight_budget": "lower"}),
        ("Not too expensive, thanks", {}),
        ("I'm vegetarian and gluten free", {"dietary_restrictions": ["vegetarian", "gluten-free"]}),
        ("I'm not vegan", {}),
        ("We're allergic to peanuts and shellfish", {"allergies": ["peanuts", "shellfish"]}),
        ("Loved the pasta! But no more mushrooms.", {"likes": ["pasta"], "dislikes": ["mushrooms"]}),
        ("Fewer spicy dishes, too many onions", {"dislikes": ["spicy", "onions"]}),
        ("I'd love more fish and chicken recipes", {"likes": ["fish", "chicken"]}),
        ("The kids found it too salty", {"dislikes": ["salty"]}),
        ("more slow cooker recipes please", {"likes": ["slow cooker"]}),
        ("It took way too long.", {"speed": "faster"}),
        ("The answer was way too long.", {"verbosity": "shorter"}),
        ("Please cite your sources", {"wants_citations": True}),
        ("no need for citations", {"wants_citations": False}),
        ("more protein sources", {"likes": ["protein sources"]}),
        ("More detail please", {"verbosity": "longer"}),
    ],
)
def test_offline_rules_read_realistic_sentences(text, expected):
    # Given a sentence / When the offline policy reads it / Then it extracts exactly these preferences
    assert _extract(text)["prefs"] == expected


@pytest.mark.parametrize(
    ("text", "quality", "complaint"),
    [
        (DINING, None, True),
        ("This was useless", None, True),
        ("It didn't find the file", None, True),
        ("not bad at all, thanks", None, False),
        ("Perfect, thank you", None, False),
        ("ok", 2, True),
        ("ok", 3, False),
    ],
)
def test_offline_rules_recognise_complaints(text, quality, complaint):
    assert _extract(text, quality=quality)["complaint"] is complaint


# --------------------------------------------------------------------------- learnings


def test_learnings_aggregate_completions_failures_and_ratings(world):
    # Given three finished missions
    for index, fields in enumerate(
        [{"completed": True, "quality": 5}, {"completed": True, "quality": 3}, {"completed": False}]
    ):
        world.give(world.mission(f"m{index}", status="completed" if fields["completed"] else "failed"), **fields)
    # When the capability's learnings are read
    learnings = world.learnings.get("dining")
    # Then they count each outcome and average the ratings given
    assert (learnings.completions, learnings.failures, learnings.feedback_count) == (2, 1, 3)
    assert (learnings.rating_sum, learnings.rating_count) == (8, 2)
    assert learnings.average_rating == 4.0
    assert learnings.completion_rate == pytest.approx(2 / 3)
    # And a capability without feedback has zeros and no averages
    empty = world.learnings.get("unknown")
    assert empty.feedback_count == 0 and empty.average_rating is None and empty.completion_rate is None


class LockedClient:
    """Serializes calls to the moto-backed client.

    moto's in-memory DynamoDB applies an UpdateItem as a Python read-modify-write without a
    lock, so concurrent calls can race inside moto itself (real DynamoDB applies ADD atomically).
    Serializing single calls keeps the test meaningful: the store must do one atomic UpdateItem
    per feedback, because a get-then-put implementation would still lose counts between its calls.
    """

    def __init__(self, client: Any):
        self._client = client
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return method(*args, **kwargs)

        return call


@pytest.fixture
def dynamo_client(monkeypatch):
    import boto3
    from moto import mock_aws

    from missions.adapters.dynamodb.tables import table_definition

    use_fake_aws(monkeypatch)
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(**table_definition(LEARNINGS, "test-learnings"))
        yield client


def test_dynamo_learnings_count_every_one_of_50_concurrent_feedbacks(dynamo_client):
    # Given the learnings table in moto
    store = DynamoLearningsStore("test-learnings", client=LockedClient(dynamo_client))
    # When 50 feedbacks are recorded at once from 50 threads
    start = threading.Barrier(50)
    errors: list[BaseException] = []

    def give(index: int) -> None:
        try:
            start.wait()
            store.record("dining", completed=index % 2 == 0, rating=index % 5 + 1)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=give, args=(i,)) for i in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then none is lost
    assert errors == []
    learnings = store.get("dining")
    assert (learnings.completions, learnings.failures, learnings.feedback_count) == (25, 25, 50)
    assert (learnings.rating_sum, learnings.rating_count) == (sum(i % 5 + 1 for i in range(50)), 50)
    assert learnings.average_rating == 3.0


def test_dynamo_learnings_record_partial_feedback_and_read_zeros(dynamo_client):
    # Given the learnings table
    store = DynamoLearningsStore("test-learnings", client=dynamo_client)
    # Then an unknown capability reads as zeros
    assert store.get("dining").feedback_count == 0
    # When feedback without outcome or rating is recorded, then one with a failure and a rating
    store.record("dining", completed=None, rating=None)
    store.record("dining", completed=False, rating=2)
    # Then only what was given is counted
    learnings = store.get("dining")
    assert learnings.model_dump() == {
        "capability": "dining",
        "completions": 0,
        "failures": 1,
        "rating_sum": 2,
        "rating_count": 1,
        "feedback_count": 2,
    }
    # And the update is one UpdateItem with ADD (atomic in DynamoDB)
    calls: list[dict[str, Any]] = []

    class Spy:
        def update_item(self, **kwargs: Any) -> None:
            calls.append(kwargs)

    DynamoLearningsStore("t", client=Spy()).record("x", completed=True, rating=4)
    (call,) = calls
    assert call["UpdateExpression"].startswith("ADD ")


# --------------------------------------------------------------------------- refusals


def test_feedback_on_another_users_mission_is_refused_and_changes_nothing(world):
    # Given alice's finished mission
    mission = world.mission()
    before = world.snapshot()
    # When bob gives feedback on it / Then it is refused as if there were no such mission
    with pytest.raises(NotFound):
        world.give(mission, user="bob", quality=1, text="too expensive")
    # And nothing changed
    assert world.snapshot() == before
    assert preferences_for("bob", world.memory) == {}


@pytest.mark.parametrize("status", ["created", "running", "interrupted"])
def test_feedback_on_an_unfinished_mission_is_refused_and_changes_nothing(world, status):
    # Given a mission that has not finished
    mission = world.mission(status=status)
    before = world.snapshot()
    # When its owner gives feedback / Then it is refused
    with pytest.raises(ConflictError, match=f"is still {status}"):
        world.give(mission, quality=5, text="too expensive")
    # And nothing changed
    assert world.snapshot() == before


@pytest.mark.parametrize("status", ["completed", "failed", "cancelled"])
def test_feedback_is_accepted_on_every_finished_status(world, status):
    world.give(world.mission(status=status), useful=True)
    assert world.missions.get("m1").feedback["useful"] is True


def test_a_second_feedback_is_a_conflict_and_changes_nothing(world):
    # Given a mission that already has feedback
    mission = world.mission()
    world.give(mission, quality=4, text="more vegetarian options")
    before = world.snapshot()
    # When feedback is given again (even from the caller's stale copy of the record)
    with pytest.raises(ConflictError):
        world.give(mission, quality=1, text="too expensive, no more fish")
    # Then nothing changed
    assert world.snapshot() == before


def test_the_structured_part_is_stored_on_the_mission(world):
    # When feedback is given / Then the mission keeps it, with when it arrived
    world.give(world.mission(), completed=True, quality=4, useful=True, text="  fine  ")
    stored = world.missions.get("m1").feedback
    assert {k: stored[k] for k in ("completed", "quality", "useful", "text")} == {
        "completed": True,
        "quality": 4,
        "useful": True,
        "text": "fine",
    }
    assert stored["received_at"]


# --------------------------------------------------------------------------- complaints and events


def _event_types(world: World, mission_id: str = "m1") -> list[str]:
    events, _ = world.events.read(mission_id)
    return [str(event.type) for event in events]


def test_a_complaint_is_reported_in_the_outcome(world):
    outcome = world.give(world.mission(), quality=2, text="This was useless, it didn't find the file")
    assert outcome.complaint is True and "useless" in outcome.complaint_summary


def test_a_low_rating_without_text_is_a_complaint(world):
    outcome = world.give(world.mission(), quality=1)
    assert outcome.complaint is True and outcome.complaint_summary == "rated 1/5"


def test_a_complaint_emits_the_complaint_event(world):
    # When a complaint is given
    world.give(world.mission(), quality=2, text="This was useless")
    # Then the mission's events end with feedback received and the complaint
    assert _event_types(world)[-2:] == [FEEDBACK_RECEIVED, FEEDBACK_COMPLAINT]
    events, _ = world.events.read("m1")
    assert events[-1].payload["summary"] and events[-1].payload["capability"] == "dining"


def test_praise_emits_only_the_received_event(world):
    world.give(world.mission(), quality=5, text="Perfect, thank you")
    assert _event_types(world) == [FEEDBACK_RECEIVED]


def test_feedback_events_read_after_the_missions_own_events(world):
    # Given a mission whose run emitted events under checkpoint prefixes
    world.mission()
    world.events.append("m1", "0007-synthesizer", [Event(type=EventType.FLOW_COMPLETED, mission_id="m1")])
    # When feedback arrives / Then its events come after them
    world.give(world.missions.get("m1"), useful=False)
    assert _event_types(world) == [EventType.FLOW_COMPLETED.value, FEEDBACK_RECEIVED]


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"text": "   "},
        {"quality": 0},
        {"quality": 6},
        {"quality": True},
        {"text": "x" * 5001},
        {"completed": True, "rating": 3},  # unknown field
    ],
    ids=["nothing", "blank-text", "quality-0", "quality-6", "quality-bool", "text-too-long", "unknown-field"],
)
def test_invalid_feedback_is_a_validation_error(fields):
    with pytest.raises(ValidationError):
        Feedback(**fields)


def test_feedback_text_is_stripped_and_may_be_exactly_the_limit():
    assert Feedback(text="  " + "x" * 5000 + "  ").text == "x" * 5000
    assert Feedback(completed=False).completed is False


def test_preference_keys_are_normalised_to_snake_case():
    assert Preference(key="Weeknight Budget", value="lower", confidence=0.9).key == "weeknight_budget"
    with pytest.raises(ValidationError):
        Preference(key="x" * 65, value=1, confidence=0.5)
    with pytest.raises(ValidationError):
        Preference(key="budget", value="lower", confidence=1.5)


def test_two_feedbacks_at_once_both_land_in_the_merged_likes(world):
    # Given two missions of alice's, and a memory where the second feedback writes its likes
    # between the first one's read of "likes" and its write (as two functions at once would)
    first, second = world.mission("m1"), world.mission("m2")
    memory = world.memory
    interleaved = threading.Event()
    real_get = memory.get

    def get_then_let_the_other_write(user_id, namespace, key):
        item = real_get(user_id, namespace, key)
        if key == "likes" and not interleaved.is_set():
            interleaved.set()
            world.give(second, completed=True, text="more seafood please")  # lands while the first holds its read
        return item

    memory.get = get_then_let_the_other_write  # type: ignore[method-assign]
    # When the first feedback is applied
    world.give(first, completed=True, text="we want more vegetarian options")
    # Then both likes are kept: the first write met the second, read again and merged
    likes = world.stored_preference("likes")["value"]
    assert interleaved.is_set()
    assert "seafood" in likes and "vegetarian" in likes, likes
