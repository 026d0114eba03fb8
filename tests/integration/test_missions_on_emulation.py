"""Missions end to end on the local emulation: moto executes the compiled ASL and calls the real stage and interrupt
handlers in-process (missions.local.emulation.LocalCloud).

One LocalCloud serves the whole module (creating one costs seconds); every test capability
(tests/support/emulated.py) is given to it in a registry. Retries wait 1 s and the timeout test waits 2 s: moto
really sleeps on both.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from missions.core.capability.registry import Capability
from missions.core.errors import AnswerRejected, ConflictError
from missions.core.mission.envelope import InterruptKind
from missions.core.mission.events import EventType
from missions.core.pipeline.compiler import FINALIZE
from missions.local.emulation import LocalCloud, MissionOutcome
from missions.service import launcher
from missions.service.checkpoints import stage_history, state_at
from tests.integration.conftest import (
    REPO_ROOT,
    stage_tasks,
    with_capabilities,
)
from tests.support.emulated import (
    BLOB,
    BROKEN,
    BROKEN_CALLS,
    BULKY,
    CLARIFY_AT_ASKER,
    CLARIFY_AT_WORK,
    FAN_CONCURRENCY,
    FAN_OUT,
    FLAKY,
    FLAKY_CALLS,
    LOOP,
    MISDEFINED,
    MISDEFINED_CALLS,
    PARALLEL,
    TEST_CAPABILITIES,
    TIMEOUT,
)

WAIT = 30.0  # seconds; a mission here takes well under 5


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    names, known = with_capabilities(*TEST_CAPABILITIES)
    with LocalCloud(["code_analysis", *names], registry=known) as local:
        yield local


def _run(cloud: LocalCloud, capability: str, goal: str = "go", **kwargs: Any) -> MissionOutcome:
    return cloud.run(capability, goal, timeout=WAIT, **kwargs)


def _states_after(states: list[str], state: str) -> list[str]:
    assert state in states, states
    return states[states.index(state) + 1 :]


QUESTION = "How does EnvelopeCodec offload large fields?"

READS = re.compile(r"^\S+ line \d+ reads `(?P<text>.*)`$", re.S)

SYMBOL = re.compile(
    r"^`(?P<qualname>[^`]+)` is a (?:class|function|method|interface|type) defined at \S+ as `(?P<signature>[^`]*)`"
)


def _claimed_texts(claim: str) -> list[str]:
    """The backticked text of a claim that must appear on the line it cites."""
    if match := READS.match(claim):  # a matching line, quoted whole (it may hold backticks itself)
        return [match["text"]]
    if match := SYMBOL.match(claim):  # a definition: its name and the head of its signature
        return [match["qualname"].rsplit(".", 1)[-1], match["signature"].split("(", 1)[0]]
    return re.findall(r"`([^`]+)`", claim)


@pytest.fixture(scope="module")
def analysis(cloud: LocalCloud) -> MissionOutcome:
    # Given this very repository, resolved from this file's path
    assert (REPO_ROOT / "shared" / "missions" / "core" / "mission" / "offload.py").is_file()
    # When code_analysis answers a question about it
    return _run(cloud, "code_analysis", QUESTION, context={"repo": str(REPO_ROOT)})


def test_code_analysis_answers_with_citations_that_point_at_real_lines(analysis: MissionOutcome) -> None:
    # Then the mission succeeded with a non-empty answer
    assert analysis.status == "SUCCEEDED", (analysis.error, analysis.cause)
    envelope = analysis.envelope
    assert envelope is not None and envelope.terminal_reason == "completed", envelope and envelope.errors
    output = envelope.output("integration")
    assert output["answer"].strip()
    assert envelope.citations and output["citations"] and output["findings"]

    # And every citation the tools returned names a file that exists
    for citation in envelope.citations:
        assert (REPO_ROOT / citation.file).is_file(), citation

    # And every claim's backticked text is on the line it cites
    for finding in output["findings"]:
        texts = _claimed_texts(finding["claim"])
        assert texts, f"claim without quoted code: {finding['claim']!r}"
        for ref in finding["citations"]:
            file, line = ref.rsplit(":", 1)
            lines = (REPO_ROOT / file).read_text(encoding="utf-8").splitlines()
            assert 1 <= int(line) <= len(lines), ref
            for text in texts:
                assert text in lines[int(line) - 1], f"{text!r} is not on {ref}: {lines[int(line) - 1]!r}"
    assert set(output["citations"]) == {ref for f in output["findings"] for ref in f["citations"]}


def test_code_analysis_events_read_back_in_order(cloud: LocalCloud, analysis: MissionOutcome) -> None:
    # When the events are read back, all at once and page by page through the cursor
    events, cursor = cloud.events(analysis.mission_id)
    paged, after = [], None
    while True:
        page, after = cloud.runtime.events.read(analysis.mission_id, after=after, limit=7)
        if not page:
            break
        paged += page

    # Then both reads agree and positions strictly increase
    positions = [event.position for event in events]
    assert positions == [event.position for event in paged]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    assert cursor == positions[-1]

    # And the flow's start is the first event and its completion the last, each exactly once
    types = [event.type for event in events]
    assert types[0] is EventType.FLOW_STARTED
    assert types[-1] is EventType.FLOW_COMPLETED, [t.value for t in types[-3:]]
    assert types.count(EventType.FLOW_STARTED) == 1
    completed = [event for event in events if event.type is EventType.FLOW_COMPLETED]
    assert len(completed) == 1 and completed[0].payload["terminal_reason"] == "completed"
    assert EventType.FLOW_ERROR not in types

    # And the stages started in the order the state machine entered them
    started = [event.stage for event in events if event.type is EventType.AGENT_STARTED]
    capability = cloud.runtime.runner("code_analysis").capability
    assert started == stage_tasks(cloud.iter_states(analysis.mission_id), capability)


def test_code_analysis_records_the_mission_and_a_checkpoint_chain(cloud: LocalCloud, analysis: MissionOutcome) -> None:
    envelope = analysis.envelope
    assert envelope is not None
    # Then the mission record is completed and holds the result
    record = cloud.runtime.missions.get(analysis.mission_id)
    assert record.status == "completed"
    assert record.terminal_reason == "completed"
    assert record.result is not None
    assert record.result["answer"] == envelope.output("integration")["answer"]
    assert record.result["terminal_reason"] == "completed" and record.result["citations"]
    assert record.pending_interrupt is None

    # And the checkpoints list oldest first, each the child of the one before
    checkpoints = cloud.runtime.checkpoints.list(analysis.mission_id)
    ids = [c.checkpoint_id for c in checkpoints]
    assert ids == sorted(ids) and len(ids) == envelope.counters.agent_hops
    assert checkpoints[0].parent_id is None
    for parent, child in zip(checkpoints, checkpoints[1:], strict=False):
        assert child.parent_id == parent.checkpoint_id
    assert checkpoints[0].stage == "perception" and checkpoints[-1].stage == "integration"
    assert cloud.runtime.checkpoints.latest(analysis.mission_id).checkpoint_id == ids[-1]
    last = cloud.runtime.codec.decode(state_at(cloud.runtime.checkpoints, analysis.mission_id, checkpoints[-1]))
    assert last.terminal_reason == "completed" and last.checkpoint_id == ids[-1]
    assert last.model_dump(exclude={"segment_yield"}) == envelope.model_dump(exclude={"segment_yield"})


def ended_with(cloud: LocalCloud, mission_id: str) -> dict[str, Any]:
    """The state at the mission's last checkpoint, decoded (the handler's word to its segment aside)."""
    last = cloud.runtime.checkpoints.latest(mission_id)
    assert last is not None
    state = cloud.runtime.codec.decode(state_at(cloud.runtime.checkpoints, mission_id, last))
    return state.model_dump(exclude={"segment_yield"})


def _wait_for_interrupt(cloud: LocalCloud, mission_id: str):
    status = cloud.wait(mission_id, timeout=WAIT, until_interrupt=True)
    if status != "INTERRUPTED":
        outcome = cloud.outcome(mission_id)
        pytest.fail(
            f"the mission never waited for a human: {status}, "
            f"{outcome.envelope and (outcome.envelope.terminal_reason, outcome.envelope.errors)}"
        )
    [record] = cloud.runtime.interrupts.pending(mission_id)
    return record


@pytest.mark.parametrize(
    ("capability", "resumed_stage", "stages_after_answer"),
    [
        pytest.param(CLARIFY_AT_WORK, "work", ["work", "final"], id="configured-resume-stage"),
        pytest.param(CLARIFY_AT_ASKER, "ask", ["ask", "work", "final"], id="resume-at-the-asking-stage"),
    ],
)
def test_a_clarification_answered_through_send_task_success_resumes_at_the_right_stage(
    cloud: LocalCloud, capability: Capability, resumed_stage: str, stages_after_answer: list[str]
) -> None:
    # Given a mission whose "ask" stage asked a clarification and waits for a human
    mission_id = cloud.start(capability.name, "Paint the fence")
    record = _wait_for_interrupt(cloud, mission_id)
    assert (record.kind, record.stage, record.question, record.status) == (
        InterruptKind.CLARIFICATION,
        "ask",
        "which?",
        "pending",
    )
    mission = cloud.runtime.missions.get(mission_id)
    assert mission.status == "interrupted" and mission.pending_interrupt == record.interrupt_id

    # When the human answers
    cloud.answer(mission_id, record.interrupt_id, {"text": "the blue one"})

    # Then the execution resumes and completes
    assert cloud.wait(mission_id, timeout=WAIT) == "SUCCEEDED"
    outcome = cloud.outcome(mission_id)
    envelope = outcome.envelope
    assert envelope is not None and envelope.terminal_reason == "completed"

    # And it resumed at the right stage: the first stage after await.clarification
    after = _states_after(list(cloud.iter_states(mission_id)), "await.clarification")
    assert stage_tasks(after, capability) == stages_after_answer

    # And that stage got the answer (its output, as its checkpoint keeps it), which the envelope keeps
    assert cloud.outputs(mission_id)[resumed_stage]["resumed_with"] == "the blue one"
    assert [answer["response"]["text"] for answer in envelope.answers] == ["the blue one"]
    assert envelope.answers[0]["interrupt_id"] == record.interrupt_id
    assert envelope.interrupt is None
    assert "the blue one" in envelope.output("work")["text"]  # the scripted model heard it too
    assert cloud.runtime.interrupts.get(mission_id, record.interrupt_id).status == "answered"
    assert cloud.runtime.missions.get(mission_id).status == "completed"
    types = [event.type for event in cloud.events(mission_id)[0]]
    assert types.index(EventType.INTERRUPT_RAISED) < types.index(EventType.INTERRUPT_ANSWERED)
    # And its checkpoints (what each stage changed, folded from a whole envelope) end in that very envelope
    assert ended_with(cloud, mission_id) == envelope.model_dump(exclude={"segment_yield"})


def test_an_interrupt_takes_one_answer_of_the_right_shape(cloud: LocalCloud) -> None:
    # Given a mission waiting for a clarification
    mission_id = cloud.start(CLARIFY_AT_WORK.name, "Paint the fence")
    record = _wait_for_interrupt(cloud, mission_id)

    # When the answer has the wrong shape for a clarification
    with pytest.raises(AnswerRejected):
        cloud.answer(mission_id, record.interrupt_id, {"approved": True})

    # Then nothing changed: the record is pending and the execution still waits
    unchanged = cloud.runtime.interrupts.get(mission_id, record.interrupt_id)
    assert unchanged.status == "pending" and unchanged.response is None
    assert cloud.runtime.missions.get(mission_id).status == "interrupted"
    assert cloud.status(mission_id) == "RUNNING"

    # When a right answer comes, and then a second one
    cloud.answer(mission_id, record.interrupt_id, {"text": "the blue one"})
    with pytest.raises(ConflictError):
        cloud.answer(mission_id, record.interrupt_id, {"text": "the red one"})

    # Then only the first answer counts
    assert cloud.wait(mission_id, timeout=WAIT) == "SUCCEEDED"
    envelope = cloud.outcome(mission_id).envelope
    assert envelope is not None and envelope.terminal_reason == "completed"
    assert [answer["response"]["text"] for answer in envelope.answers] == ["the blue one"]
    assert cloud.runtime.interrupts.get(mission_id, record.interrupt_id).response.text == "the blue one"


@pytest.fixture(scope="module")
def timed_out(cloud: LocalCloud) -> MissionOutcome:
    # Given a mission that asks a human, who never answers within interrupt_timeout_seconds=2
    return _run(cloud, TIMEOUT.name, "Paint the fence")


def test_an_unanswered_interrupt_times_out_and_ends_the_mission_through_finalize(
    cloud: LocalCloud, timed_out: MissionOutcome
) -> None:
    # Then the execution itself succeeds, through the final stage in finalize mode
    assert timed_out.status == "SUCCEEDED", (timed_out.error, timed_out.cause)
    assert timed_out.envelope is not None
    assert timed_out.envelope.terminal_reason == "interrupt_timeout", timed_out.envelope.errors
    after = _states_after(list(cloud.iter_states(timed_out.mission_id)), "await.clarification")
    assert after[0] == "await.clarification.timeout" and stage_tasks(after, TIMEOUT) == [FINALIZE]
    assert timed_out.envelope.output("final")["answer"] == "nobody answered"

    # And the mission record says it failed, and why
    record = cloud.runtime.missions.get(timed_out.mission_id)
    assert record.status == "failed" and record.terminal_reason == "interrupt_timeout"


def test_a_late_answer_after_the_timeout_is_refused_and_not_recorded(
    cloud: LocalCloud, timed_out: MissionOutcome
) -> None:
    # Given the interrupt of a mission that timed out: the finalize path expired it
    assert timed_out.envelope is not None and timed_out.envelope.terminal_reason == "interrupt_timeout"
    assert cloud.runtime.interrupts.pending(timed_out.mission_id) == []
    events, _ = cloud.events(timed_out.mission_id)
    raised = next(e for e in events if e.type.value == "interrupt.raised")
    record = cloud.runtime.interrupts.get(timed_out.mission_id, raised.payload["interrupt_id"])
    assert record.status == "expired"

    # When someone answers it late
    with pytest.raises(ConflictError):
        cloud.answer(timed_out.mission_id, record.interrupt_id, {"text": "too late"})

    # Then the refused answer is not recorded as the answer
    after = cloud.runtime.interrupts.get(timed_out.mission_id, record.interrupt_id)
    assert after.status != "answered" and after.response is None
    assert cloud.runtime.missions.get(timed_out.mission_id).status == "failed"


def test_a_stage_that_fails_once_is_retried_by_step_functions(cloud: LocalCloud) -> None:
    # Given a stage that raises RuntimeError on its first call only (max_retries=1)
    FLAKY_CALLS[0] = 0

    # When the mission runs
    outcome = _run(cloud, FLAKY.name)

    # Then the Task's Retry called it again and the mission completed
    assert outcome.status == "SUCCEEDED", (outcome.error, outcome.cause)
    assert outcome.envelope is not None and outcome.envelope.terminal_reason == "completed"
    assert FLAKY_CALLS[0] == 2
    assert outcome.envelope.output("flaky") == {"ok": True}
    assert outcome.envelope.errors == []
    assert stage_tasks(cloud.iter_states(outcome.mission_id), FLAKY) == ["start", "flaky", "final"]
    # the failed attempt left an audit trail, marked retryable
    errors = [e for e in cloud.events(outcome.mission_id)[0] if e.type is EventType.FLOW_ERROR]
    assert [(e.stage, e.payload["error"], e.payload["retryable"]) for e in errors] == [("flaky", "RuntimeError", True)]
    assert cloud.runtime.missions.get(outcome.mission_id).status == "completed"


def test_a_stage_that_always_fails_ends_the_mission_cleanly(cloud: LocalCloud) -> None:
    # Given a stage that always raises RuntimeError (max_retries=1)
    BROKEN_CALLS[0] = 0

    # When the mission runs
    outcome = _run(cloud, BROKEN.name)

    # Then it was tried 1 + max_retries times, and the execution still succeeds through finalize
    assert BROKEN_CALLS[0] == 2
    assert outcome.status == "SUCCEEDED", (outcome.error, outcome.cause)
    envelope = outcome.envelope
    assert envelope is not None and envelope.terminal_reason == "stage_failed:broken"
    after = _states_after(list(cloud.iter_states(outcome.mission_id)), "broken")
    assert after[0] == "broken.failed" and stage_tasks(after, BROKEN) == [FINALIZE]
    assert envelope.output("final")["answer"] == "partial"

    # And the error is recorded in the envelope and the mission record says failed
    [error] = [e for e in envelope.errors if e.stage == "broken"]
    assert error.kind == "RuntimeError" and "always broken" in error.message
    record = cloud.runtime.missions.get(outcome.mission_id)
    assert record.status == "failed" and record.terminal_reason == "stage_failed:broken"


def test_a_stage_definition_error_is_not_retried(cloud: LocalCloud) -> None:
    # Given a stage raising StageDefinitionError although it allows a retry
    MISDEFINED_CALLS[0] = 0

    # When the mission runs
    outcome = _run(cloud, MISDEFINED.name)

    # Then it ran once and the mission ended cleanly as failed
    assert MISDEFINED_CALLS[0] == 1
    assert outcome.status == "SUCCEEDED", (outcome.error, outcome.cause)
    assert outcome.envelope is not None and outcome.envelope.terminal_reason == "stage_failed:misdefined"
    assert [(e.stage, e.kind) for e in outcome.envelope.errors] == [("misdefined", "StageDefinitionError")]
    assert cloud.runtime.missions.get(outcome.mission_id).status == "failed"


def test_two_megabytes_from_a_tool_never_swell_the_state_machine_state(cloud: LocalCloud) -> None:
    # When a stage's tool returns 2 MB and the final stage measures it
    outcome = _run(cloud, BULKY.name)

    # Then the mission completed and no Step Functions state came near the limits
    assert outcome.status == "SUCCEEDED", (outcome.error, outcome.cause)
    envelope = outcome.envelope
    assert envelope is not None and envelope.terminal_reason == "completed"
    assert cloud.largest_state_bytes(outcome.mission_id) < 64 * 1024

    # And the final stage still read the whole 2 MB, as does whoever decodes the result
    assert envelope.output("report")["blob_len"] == 2_000_000
    assert envelope.output("fetch")["status"] == "success"
    assert envelope.output("fetch")["blob"] == BLOB
    assert (
        "outputs.fetch"
        in json.loads(cloud.sfn.describe_execution(executionArn=cloud.execution_arn(outcome.mission_id))["output"])[
            "envelope"
        ]["refs"]
    )
    # too big even compressed for a DynamoDB item: the blob went to S3
    assert cloud.s3.list_objects_v2(Bucket=cloud.settings.blob_bucket, Prefix="blobs/").get("KeyCount", 0) >= 1
    assert cloud.runtime.missions.get(outcome.mission_id).result["answer"] == "measured"


def test_a_parallel_group_runs_in_a_parallel_state_and_the_join_sees_both(cloud: LocalCloud) -> None:
    # When a -> {b, c} -> d runs
    outcome = _run(cloud, PARALLEL.name)

    # Then b and c ran as branches of one Parallel state, before d
    assert outcome.status == "SUCCEEDED", (outcome.error, outcome.cause)
    envelope = outcome.envelope
    assert envelope is not None and envelope.terminal_reason == "completed"
    states = list(cloud.iter_states(outcome.mission_id))
    ran = [state for state in _states_after(states, "parallel.b+c") if state in ("b.branch", "c.branch", "d")]
    assert sorted(ran[:2]) == ["b.branch", "c.branch"] and ran[2:] == ["d"]
    assert "b" not in states and "c" not in states  # no sequential Task for them

    # And d saw both outputs
    assert envelope.output("d")["seen"] == {"b": {"from": "b", "value": 11}, "c": {"from": "c", "value": 21}}
    assert sorted(r.stage for r in stage_history(cloud.runtime.checkpoints, outcome.mission_id)) == ["a", "b", "c", "d"]
    assert envelope.counters.agent_hops == 4 and envelope.branch_results is None


def test_a_fan_out_stage_maps_over_work_items_and_its_join_folds_them(cloud: LocalCloud) -> None:
    # Given a stage that fans out over [1, 2, 3, 4] (ctx.fan_out) before a fan-out stage
    FAN_CONCURRENCY.update(now=0, peak=0)

    # When the mission runs
    outcome = _run(cloud, FAN_OUT.name)

    # Then a Map ran one item per work item, at most 2 at a time, and then the join
    assert outcome.status == "SUCCEEDED", (outcome.error, outcome.cause)
    envelope = outcome.envelope
    assert envelope is not None and envelope.terminal_reason == "completed"
    after = _states_after(list(cloud.iter_states(outcome.mission_id)), "each.map")
    assert [state for state in after if state in ("each.item", "each")] == ["each.item"] * 4 + ["each"]
    assert 1 <= FAN_CONCURRENCY["peak"] <= 2

    # And the join kept the per-item outputs in item order, which the stage after it read and summed
    # (typed stages fold a fan-out in the stage after it, which takes `items`)
    assert envelope.output("each") == {"items": [{"value": 10}, {"value": 20}, {"value": 30}, {"value": 40}]}
    assert envelope.output("total")["values"] == [10, 20, 30, 40]
    assert envelope.output("total")["sum"] == 100
    assert envelope.work_items is None  # spent by the join: nothing after it sees them


def _lift_the_envelopes_hop_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start missions whose envelope allows 10,000 hops while the state machine's guard keeps the
    capability's 6: the execution input the launcher builds, with the envelope's own bound lifted.

    This used to be a buggy stage lifting its bound through the envelope; typed stages never see the
    envelope (Ctx gives copies), so a mismatch between the envelope's bound and the guard can only
    come from the runtime itself, and is made here where the execution input is built."""
    build = launcher.initial_state

    def initial_state(envelope: dict[str, Any], max_agent_hops: int) -> dict[str, Any]:
        lifted = {**envelope, "bounds": {**envelope["bounds"], "max_agent_hops": 10_000}}
        return build(lifted, max_agent_hops)

    monkeypatch.setattr(launcher, "initial_state", initial_state)


@pytest.mark.parametrize(
    "asl_guard",
    [
        pytest.param(False, id="the-runner-stops-first"),
        pytest.param(True, id="the-envelope-bound-is-lifted-and-the-asl-guard-stops-it"),
    ],
)
def test_the_hop_bound_ends_an_endless_loop(
    cloud: LocalCloud, asl_guard: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a <-> b with an edge limit of 1000, no iteration counting, and max_agent_hops=6
    assert LOOP.pipeline.bounds.max_agent_hops == 6
    if asl_guard:  # and an envelope whose own hop bound is lifted, so the runner never stops the loop
        _lift_the_envelopes_hop_bound(monkeypatch)

    # When the mission runs
    outcome = _run(cloud, LOOP.name)

    # Then it ended with terminal reason max_agent_hops after at most 6 stage Tasks
    assert outcome.status == "SUCCEEDED", (outcome.error, outcome.cause)
    assert outcome.envelope is not None and outcome.envelope.terminal_reason == "max_agent_hops"
    assert outcome.envelope.bounds.max_agent_hops == (10_000 if asl_guard else 6)
    states = list(cloud.iter_states(outcome.mission_id))
    tasks = stage_tasks(states, LOOP)
    assert len(tasks) <= 6, tasks
    assert tasks[:5] == ["a", "b", "a", "b", "a"]

    # And when the runner's own bound was lifted, the state machine's guard is what stopped it
    assert ("guard.max_agent_hops" in states) is asl_guard
    assert tasks[-1] == (FINALIZE if asl_guard else "final")
    assert cloud.runtime.missions.get(outcome.mission_id).terminal_reason == "max_agent_hops"
