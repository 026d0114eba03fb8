"""The lifecycle users see (seed 004) from a mission's status and its running stage's phase."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from missions.adapters.memory.missions import MemoryMissionStore
from missions.core.capability import registry as registry
from missions.core.errors import ConflictError, TransitionRefused
from missions.core.mission.status import ALLOWED_FROM, TERMINAL, MissionStatus
from missions.ports.missions import LIFECYCLE, MissionRecord, lifecycle_of
from missions.service.lifecycle import Lifecycle


@pytest.mark.parametrize(
    ("status", "stage", "phase", "expected"),
    [
        ("created", None, None, "created"),
        ("queued", None, None, "created"),
        ("running", None, None, "planning"),
        ("running", "intent", "planning", "planning"),
        ("running", "traverser", "executing", "executing"),
        ("running", "critic", "reflecting", "reflecting"),
        ("interrupted", "critic", "reflecting", "interrupted"),
        ("pausing", "critic", "reflecting", "paused"),
        ("paused", "critic", "reflecting", "paused"),
        ("completed", "integration", "executing", "completed"),
        ("failed", "planner", "planning", "failed"),
        ("archived", "integration", "executing", "archived"),
    ],
)
def test_lifecycle_of(status, stage, phase, expected):
    record = MissionRecord(
        mission_id="m", user_id="u", capability="c", goal="g", status=status, stage=stage, phase=phase
    )
    assert lifecycle_of(record) == expected
    assert expected in LIFECYCLE or expected == "paused"


def test_code_analysis_stages_name_the_phases_users_see():
    phases = {agent.name: agent.phase for agent in registry.load("code_analysis").pipeline.agents}
    assert phases["planner"] == "planning" and phases["critic"] == "reflecting"
    assert phases["traverser"] in (None, "executing")


STATUSES = sorted({s for allowed in ALLOWED_FROM.values() for s in allowed} | set(ALLOWED_FROM))
PAUSE_STEPS = ("pause", "paused", "unpaused", "end", "cancel")


def _step(lifecycle: Lifecycle, step: str) -> None:
    actions = {
        "pause": lambda: lifecycle.pause("m"),
        "paused": lambda: lifecycle.paused("m", "pause-0001", "token"),
        "unpaused": lambda: lifecycle.unpaused("m"),
        "end": lambda: lifecycle.end("m", "completed"),
        "cancel": lambda: lifecycle.cancelled("m"),
    }
    actions[step]()


@given(st.sampled_from(STATUSES), st.lists(st.sampled_from(PAUSE_STEPS), max_size=8))
def test_pausing_never_leaves_an_ended_mission_and_a_resume_token_only_lives_while_paused(start, steps):
    # Given a mission in any status, and any sequence of pause-related transitions (each refused or made)
    store = MemoryMissionStore()
    token = "token" if start == MissionStatus.PAUSED else None  # a paused mission waits on one
    store.create(MissionRecord(mission_id="m", user_id="u", capability="c", goal="g", status=start, pause_token=token))
    lifecycle = Lifecycle(store)
    for step in steps:
        before = store.get("m").status
        try:
            _step(lifecycle, step)
            made = True
        except TransitionRefused:
            assert store.get("m").status == before  # refused: nothing changed
            made = False
        record = store.get("m")
        # Then an ended mission never moves again
        if before in TERMINAL:
            assert record.status == before
        # and only a paused mission holds a resume token
        assert (record.pause_token is not None) == (record.status == MissionStatus.PAUSED)
        # and only a running mission can be paused
        if step == "pause" and made:
            assert before == MissionStatus.RUNNING


def test_a_missions_first_status_is_written_by_the_lifecycle_once_and_stored_as_a_plain_string():
    # Given a store / When the lifecycle records a new mission
    missions = MemoryMissionStore()
    Lifecycle(missions).queued(MissionRecord(mission_id="m", user_id="u", capability="c", goal="g"))
    # Then it is queued, its status the plain string a table holds, and a second record of it is refused
    record = missions.get("m")
    assert record.status == MissionStatus.QUEUED and type(record.status) is str
    assert record.model_dump(mode="json")["status"] == "queued"
    with pytest.raises(ConflictError):
        Lifecycle(missions).queued(MissionRecord(mission_id="m", user_id="u", capability="c", goal="again"))
    assert missions.get("m").goal == "g"


class _Pruning:
    """A pruning store (missions.ports.accounts.PersonalStore) that cannot erase one user's items."""

    name = "events"

    def __init__(self, broken_user: str) -> None:
        self.broken_user, self.erased = broken_user, []

    def export(self, user_id, mission_ids):
        return iter(())

    def erase(self, user_id, mission_ids):
        if user_id == self.broken_user:
            raise RuntimeError("table unavailable")
        self.erased.append((user_id, list(mission_ids)))
        return len(mission_ids)


def test_retention_prunes_each_users_missions_at_once_and_archives_only_what_it_pruned():
    from datetime import UTC, datetime, timedelta

    from missions.adapters.memory.checkpoints import MemoryCheckpointStore
    from missions.adapters.memory.longterm import InMemoryLongTermMemory
    from missions.service.retention import ARCHIVE_NAMESPACE, RetentionPolicy, archive_ended_missions

    # Given three ended missions of ann and two of bob, and a store that cannot erase bob's items
    missions = MemoryMissionStore()
    lifecycle = Lifecycle(missions)
    owners = {"a1": "ann", "a2": "ann", "a3": "ann", "b1": "bob", "b2": "bob"}
    for mission_id, user in owners.items():
        lifecycle.queued(MissionRecord(mission_id=mission_id, user_id=user, capability="c", goal="g"))
        lifecycle.start(mission_id)
        lifecycle.end(mission_id, MissionStatus.COMPLETED)
    memory, pruning = InMemoryLongTermMemory(), _Pruning(broken_user="bob")

    # When retention runs with a short policy, pruning
    report = archive_ended_missions(
        missions=missions,
        checkpoints=MemoryCheckpointStore(),
        memory=memory,
        policy=RetentionPolicy.minutes(1),
        now=lambda: datetime.now(UTC) + timedelta(minutes=2),
        prune=[pruning],
    )

    # Then ann's missions were pruned in one call and archived; bob's are reported, not archived, and
    # stay ended (the next run finds them again), though their summaries were kept
    assert pruning.erased == [("ann", ["a1", "a2", "a3"])]
    assert sorted(report.archived) == ["a1", "a2", "a3"]
    assert report.failures == {"b1": "RuntimeError: table unavailable", "b2": "RuntimeError: table unavailable"}
    assert {m: missions.get(m).status for m in owners} == {
        **dict.fromkeys(["a1", "a2", "a3"], MissionStatus.ARCHIVED),
        **dict.fromkeys(["b1", "b2"], MissionStatus.COMPLETED),
    }
    assert memory.get("bob", ARCHIVE_NAMESPACE, "b1") is not None
