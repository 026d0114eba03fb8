"""100 missions on the full emulation against a model that fails 30% of its HTTP attempts (timeouts,
429s, 5xx, prose instead of JSON; tests/support/models/flaky_model.py): every mission ends, a failed one with
its reason; none is stuck; and nothing a mission did happened twice (events, tool calls, answers,
executions)."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest

from missions.core.mission.envelope import ErrorRecord, InterruptKind, InterruptResponse
from missions.core.mission.events import Event, EventType
from missions.core.mission.requests import MissionRequest
from missions.core.mission.status import TERMINAL, MissionStatus
from missions.local import moto as moto_patches
from missions.local.emulation import LocalCloud
from missions.ports.interrupts import InterruptRecord
from missions.ports.missions import MissionRecord
from missions.service.checkpoints import states
from missions.service.interrupts import waiting_question
from tests.support.models.flaky_model import API_KEY, FALLBACK_MODEL, FAULTS, FlakyModel

pytestmark = pytest.mark.e2e
GOALS = {
    "shopping": "Find the best price for Sony WH-1000XM5 headphones",
    "dining": "Find an Italian restaurant for a weeknight dinner for 2",
    "travel": "Plan a 5-day Paris trip for May 2026, budget $3000, 2 travelers",
}
# 100 missions; a travel mission costs the emulation about four shopping ones, so fewer of them
MIX = {"shopping": 50, "dining": 40, "travel": 10}
USERS = 10  # 10 missions each, submitted back to back: the fourth waits for a slot
DEADLINE_S = 300.0
POLL_S = 0.1


@dataclass
class Users:
    """Plays the users: watches their missions, a user at a time (one query each), and answers each
    question once, as soon as it can be answered. Reads need no retry: the emulation serves DynamoDB
    requests one at a time (patch 11), and any error here is one a client of the API would have met."""

    cloud: LocalCloud
    missions: dict[str, str]  # mission id -> user
    ended: dict[str, MissionRecord] = field(default_factory=dict)
    answers: Counter[str] = field(default_factory=Counter)  # interrupt id -> answers given

    def poll(self) -> None:
        for user in sorted(set(self.missions.values())):
            for record in self.cloud.runtime.missions.list_for_user(user, limit=100):
                if record.mission_id in self.ended:
                    continue
                if record.status in TERMINAL:
                    # over once Step Functions reported its end too (that frees its slot)
                    whole = self.cloud.runtime.missions.get(record.mission_id)
                    if not whole.execution_arn or moto_patches.wait_reported(whole.execution_arn, 0):
                        self.ended[record.mission_id] = whole
                elif (question := waiting_question(self.cloud.runtime.interrupts, record)) is not None:
                    self.answer(record.mission_id, question.interrupt_id)

    def answer(self, mission_id: str, interrupt_id: str) -> None:
        if self.answers[interrupt_id]:
            return  # answered already; the mission shows it until a slot frees for the answer
        question = self.cloud.runtime.interrupts.get(mission_id, interrupt_id)
        self.cloud.answer(mission_id, interrupt_id, reply_to(question))
        self.answers[interrupt_id] += 1

    @property
    def running(self) -> set[str]:
        return set(self.missions) - set(self.ended)


def reply_to(question: InterruptRecord) -> InterruptResponse:
    """What a user who takes the first offer and approves the first draft answers."""
    if question.kind is InterruptKind.CHOICE:
        return InterruptResponse(decision=question.options[0])
    if question.kind is InterruptKind.CLARIFICATION:
        return InterruptResponse(text="Paris, from New York")
    return InterruptResponse(approved=True, decision="approve")


def events_of(cloud: LocalCloud, mission_id: str) -> list[Event]:
    events: list[Event] = []
    cursor = None
    while True:
        page, cursor = cloud.runtime.events.read(mission_id, after=cursor, limit=500)
        events += page
        if len(page) < 500:
            return events


def record_errors(cloud: LocalCloud, record: MissionRecord) -> list[ErrorRecord]:
    """The errors the mission's last checkpoint holds (its record keeps its result, not its errors)."""
    last = list(states(cloud.runtime.checkpoints, record.mission_id))[-1][1]
    return cloud.runtime.codec.decode(last).errors


def batches_of(events: list[Event]) -> list[list[Event]]:
    """The timeline cut into the writes that made it: a stage's commit (ending with its
    agent_completed, and the mission's orchestrator.completed after its final stage), a failed attempt
    of a stage (ending with the error it raised), or an answer."""
    batches: list[list[Event]] = [[]]
    for index, event in enumerate(events):
        batches[-1].append(event)
        after = events[index + 1].type if index + 1 < len(events) else None
        committed = event.type is EventType.AGENT_COMPLETED and "mode" not in event.payload
        if (
            (committed and after is not EventType.FLOW_COMPLETED)
            or event.type in (EventType.FLOW_COMPLETED, EventType.INTERRUPT_ANSWERED, EventType.INTERRUPT_EXPIRED)
            or (event.type is EventType.FLOW_ERROR and "retryable" in event.payload)
        ):
            batches.append([])
    return [batch for batch in batches if batch]


def side_effects_twice(cloud: LocalCloud, mission_id: str, events: list[Event], answers: Counter[str]) -> list[str]:
    """What this mission did more than once, or recorded differently from what it committed."""
    problems: list[str] = []
    positions = Counter(event.position for event in events)
    problems += [f"two events at {position}" for position, n in positions.items() if n > 1]
    batches = batches_of(events)
    copies = Counter(tuple(event.model_dump_json(exclude={"position"}) for event in batch) for batch in batches)
    problems += [f"batch written twice: {copy[0][:200]}" for copy, n in copies.items() if n > 1]

    # each stage commit is one checkpoint and one batch of events holding the tool calls it counted
    commits = [
        batch
        for batch in batches
        if batch[-1].type is not EventType.FLOW_ERROR or "retryable" not in batch[-1].payload
        if any(e.type is EventType.AGENT_STARTED and "hop" in e.payload for e in batch)
    ]
    kept = list(states(cloud.runtime.checkpoints, mission_id))  # each checkpoint, and the whole state at it
    checkpoints = {c.checkpoint_id: c for c, _ in kept}
    tool_calls = {c.checkpoint_id: cloud.runtime.codec.decode(state).counters.tool_calls for c, state in kept}
    committed = [
        next(
            f"{e.payload['hop']:04d}-{e.stage}"
            for e in batch
            if e.type is EventType.AGENT_STARTED and "hop" in e.payload
        )
        for batch in commits
    ]
    if sorted(committed) != sorted(checkpoints):
        problems.append(f"stage commits {committed} in the events, checkpoints {sorted(checkpoints)}")
    for checkpoint_id, batch in zip(committed, commits, strict=True):
        checkpoint = checkpoints.get(checkpoint_id)
        if checkpoint is None:
            continue
        tools = tool_calls[checkpoint_id] - (tool_calls[checkpoint.parent_id] if checkpoint.parent_id else 0)
        started = sum(1 for e in batch if e.type is EventType.TOOL_STARTED)
        if started != tools:
            problems.append(f"{checkpoint_id} counted {tools} tool calls, its events show {started}")

    # every question the mission asked (in a commit) was answered exactly once by its user, and every
    # sub-mission it delegated to ended (answered) exactly once, by its own end
    raised = [e.payload for batch in commits for e in batch if e.type is EventType.INTERRUPT_RAISED]
    asked = [p["interrupt_id"] for p in raised if p["kind"] != InterruptKind.DELEGATION.value]
    answered = Counter(e.payload["interrupt_id"] for e in events if e.type is EventType.INTERRUPT_ANSWERED)
    if sorted(asked) != sorted(answered) or any(n != 1 for n in answered.values()):
        problems.append(f"asked {asked}, answered {dict(answered)}")
    problems += [f"{i} answered {answers[i]} times by its user" for i in asked if answers[i] != 1]
    delegated = len(raised) - len(asked)
    ended = sum(1 for e in events if e.type is EventType.DELEGATION_ENDED)
    if ended != delegated:
        problems.append(f"{delegated} sub-mission(s) started, {ended} ended")
    return problems


def submit(cloud: LocalCloud, mix: dict[str, int], users: int) -> tuple[dict[str, tuple[str, str]], int]:
    """The mix's missions, interleaving capabilities, each user's submitted back to back:
    ({mission id: (user, capability)}, how many the dispatcher queued)."""
    order = [capability for n in range(max(mix.values())) for capability in mix if n < mix[capability]]
    missions: dict[str, tuple[str, str]] = {}
    queued = 0
    for n, capability in enumerate(order):
        user = f"user-{n * users // len(order)}"
        request = MissionRequest.parse(capability=capability, goal=GOALS[capability], user_id=user, trigger="cli")
        result = cloud.runtime.launcher.submit(request)
        missions[result.mission_id] = (user, capability)
        queued += result.status == "queued"
    return missions, queued


def play(cloud: LocalCloud, missions: dict[str, tuple[str, str]]) -> Users:
    """Their users answer every question until every mission has ended, or the deadline."""
    users = Users(cloud, {mission_id: user for mission_id, (user, _) in missions.items()})
    deadline = time.monotonic() + DEADLINE_S
    while users.running and time.monotonic() < deadline:
        users.poll()
        time.sleep(POLL_S)
    return users


def assert_each_ended_once(cloud: LocalCloud, missions: dict[str, tuple[str, str]], users: Users) -> None:
    """None is stuck, a failed one says why, nothing happened twice, no stored text quotes the key. The
    sub-missions travel's dinners started are missions of their own: the same holds for each."""
    missions = {**missions, **{m: (r.user_id, r.capability) for m, r in users.ended.items() if r.parent}}
    # none is stuck: each one ended, and its user holds no slot and no queue entry
    assert not users.running, "\n".join(describe(cloud, m) for m in sorted(users.running))
    dispatcher = cloud.runtime.launcher.dispatcher
    for user in {user for user, _ in missions.values()}:
        assert dispatcher.running(user) == set() and dispatcher.queued(user) == [], user
    # each ended as completed, or failed with the stage that failed as its reason and the model's last
    # error (its type and message) in its timeline
    timelines = {mission_id: events_of(cloud, mission_id) for mission_id in missions}
    for mission_id, record in users.ended.items():
        assert record.status in (MissionStatus.COMPLETED, MissionStatus.FAILED), record
        if record.status == MissionStatus.COMPLETED:
            assert record.terminal_reason == "completed", record
            continue
        assert record.terminal_reason and record.terminal_reason.startswith("stage_failed:"), record
        [ended] = [e for e in timelines[mission_id] if e.type is EventType.FLOW_ERROR and "reason" in e.payload]
        assert ended.payload["reason"] == record.terminal_reason, ended
        # an answer still prose after its repairs ends its stage as RepairsExhausted; a repair is a model call,
        # so a later stage may find max_llm_calls spent (shopping allows 4: two stages, two repairs)
        errors = ("TransientLLMError", "RepairsExhausted", "LLMBudgetExhausted")
        assert ended.payload["error"] in errors and ended.payload["cause"], ended
    # nothing happened twice: events, tool calls, answers
    twice = {m: side_effects_twice(cloud, m, timelines[m], users.answers) for m in missions}
    assert not any(twice.values()), {m: problems for m, problems in twice.items() if problems}
    # each mission had one execution (a state machine keeps its last ended ones: all of these)
    per_machine = Counter(capability for _, capability in missions.values())
    assert max(per_machine.values()) <= moto_patches.KEEP_ENDED_EXECUTIONS, per_machine
    executions = Counter(
        (capability, execution["name"])
        for capability, arn in cloud.state_machines.items()
        for execution in cloud.sfn.list_executions(stateMachineArn=arn, maxResults=1000)["executions"]
    )
    assert executions == Counter((capability, mission_id) for mission_id, (_, capability) in missions.items())
    # no stored text quotes the model's key (the flaky server quotes it in its 5xx errors)
    stored = [record.model_dump_json() for record in users.ended.values()]
    stored += [event.model_dump_json() for events in timelines.values() for event in events]
    assert not [text for text in stored if API_KEY in text]


def test_every_mission_ends_with_a_reason_despite_a_flaky_model() -> None:
    model = FlakyModel(seed=2026, fault_rate=0.3)
    started = time.monotonic()
    with LocalCloud(list(MIX), llm=model) as cloud:
        # Given 100 missions of three capabilities from 10 users, each user's submitted back to back
        missions, queued = submit(cloud, MIX, USERS)
        assert queued > 0  # some waited for a slot

        # When their users answer every question they ask
        users = play(cloud, missions)
        statuses = Counter(record.status for record in users.ended.values())
        print(
            f"\n{len(missions)} missions ({queued} queued at submit) ended in {time.monotonic() - started:.1f}s: "
            f"{dict(statuses)}, reasons {dict(Counter(r.terminal_reason for r in users.ended.values()))}; "
            f"faults {dict(model.faults)}; HTTP {dict(model.transport.statuses)}; "
            f"attempts by model {dict(model.transport.models)}; calls {dict(model.outcomes)}"
        )

        # Then each ended, once, with its reason
        assert_each_ended_once(cloud, missions, users)
        assert statuses[MissionStatus.COMPLETED] > 0
        # And each kind of fault was met, and the defences with them: JSON repair rescued answers, the
        # fallback model was asked, prose was answered again when the stage asked again (its repairs), and
        # calls that still failed were retried by the state machine
        assert set(model.faults) == set(FAULTS), model.faults
        assert model.outcomes["repaired"] and model.transport.models[FALLBACK_MODEL], model.outcomes
        assert model.outcomes["InvalidOutput"] > 0, model.outcomes
        repairs = {
            m: [e for e in record_errors(cloud, r) if "(repaired by" in e.message] for m, r in users.ended.items()
        }
        completed = [m for m, found in repairs.items() if found and users.ended[m].status == MissionStatus.COMPLETED]
        print(f"answers repaired by asking again: {sum(map(len, repairs.values()))}, in {len(completed)} completed")
        assert completed


def test_missions_a_model_never_answers_fail_at_their_first_model_stage_with_why() -> None:
    # Given a model every attempt of which times out, is rate-limited or answers 5xx
    model = FlakyModel(seed=7, fault_rate=1.0, faults=("timeout", "rate_limit", "server_error"))
    with LocalCloud(list(MIX), llm=model) as cloud:
        # When a mission of each capability runs (one user)
        missions, _ = submit(cloud, dict.fromkeys(MIX, 1), 1)
        users = play(cloud, missions)

        # Then each ended, once, failed at its first stage that calls the model, saying why
        assert_each_ended_once(cloud, missions, users)
        reasons = {capability: users.ended[m].terminal_reason for m, (_, capability) in missions.items()}
        first = {"shopping": "execute", "dining": "plan", "travel": "planner"}
        assert reasons == {capability: f"stage_failed:{stage}" for capability, stage in first.items()}
        assert model.outcomes["TransientLLMError"] >= 2 * len(missions)  # the stage, then its retry


def describe(cloud: LocalCloud, mission_id: str) -> str:
    """A stuck mission, for the failure message: its record, its execution's last steps, its events."""
    record = cloud.runtime.missions.get(mission_id)
    lines = [f"{mission_id}: {record.model_dump(exclude={'result'})}"]
    if record.execution_arn:
        status = cloud.sfn.describe_execution(executionArn=record.execution_arn)["status"]
        lines.append(f"  execution {status}")
        for event in cloud.history(mission_id)[-8:]:
            details = {k: v for k, v in event.items() if k.endswith("Details")}
            lines.append(f"    {event['type']} {json.dumps(details, default=str)[:500]}")
    pending = [p.model_dump(exclude={"task_token"}) for p in cloud.runtime.interrupts.pending(mission_id)]
    lines.append(f"  pending {pending}")
    dispatcher = cloud.runtime.launcher.dispatcher
    queue = [entry.mission_id for entry in dispatcher.queued(record.user_id)]
    lines.append(f"  {record.user_id} running {dispatcher.running(record.user_id)}, queued {queue}")
    lines += [
        f"    {e.position} {e.type.value} {e.stage} {json.dumps(e.payload)[:300]}"
        for e in events_of(cloud, mission_id)[-8:]
    ]
    return "\n".join(lines)
