"""The meter counts a real mission on the emulation (missions.local.metering.Meter), and
missions.core.cost.infrastructure prices it.

One LocalCloud serves the module; each test meters its own calls with its own Meter, one
mission at a time (the meter counts every in-process invocation while it runs).
"""

from __future__ import annotations

import io
import json
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from missions.core.capability import registry as registry
from missions.core.cost.infrastructure import Usage, estimate, item_size, lambda_gb_seconds
from missions.core.mission.envelope import utcnow
from missions.core.specs import stage_function_name
from missions.local import moto as moto_patches
from missions.local.emulation import LocalCloud, MissionOutcome
from missions.local.metering import Invocation, Meter
from tests.integration.conftest import REPO_ROOT, stage_tasks
from tests.support.aws import use_fake_aws

WAIT = 30.0
QUESTION = "How does EnvelopeCodec offload large fields, and where is max_agent_hops enforced?"


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    with pytest.MonkeyPatch.context() as env:
        use_fake_aws(env)
        with LocalCloud(["code_analysis"]) as local:
            yield local


@dataclass
class Metered:
    outcome: MissionOutcome
    usage: Usage
    writes: dict[str, dict[str, int]]  # write units per table, and within it per index
    invocations: list[Invocation]
    history: list[dict[str, Any]]
    states: list[str]  # the states entered, in order
    sources: dict[str, Any]  # what each function (or the harness) used


@pytest.fixture(scope="module")
def demo(cloud: LocalCloud) -> Metered:
    # Given the demo question about this repository, run under a meter
    with Meter(cloud) as meter:
        outcome = meter.run("code_analysis", QUESTION, timeout=WAIT, context={"repo": str(REPO_ROOT)})
        usage = meter.usage_for(outcome.mission_id)
    assert outcome.status == "SUCCEEDED", (outcome.error, outcome.cause)
    history = cloud.history(outcome.mission_id)
    return Metered(
        outcome,
        usage,
        meter.write_units_by_table(),
        list(meter.invocations),
        history,
        list(cloud.iter_states(outcome.mission_id)),
        meter.by_source(),
    )


# =========================================================================== a real mission


def test_transitions_are_the_states_the_execution_entered(demo: Metered, cloud: LocalCloud) -> None:
    # Then one Standard transition is billed per state the mission's own execution entered
    own = [e for e in cloud.history(demo.outcome.mission_id, segments=False) if e["type"].endswith("StateEntered")]
    assert demo.usage.state_transitions == len(own) > 0
    # and each of its Express segments is one request, billed by duration (its transitions are shown, not billed)
    segments = cloud.segments(demo.outcome.mission_id)
    assert demo.usage.express_requests == len(segments) >= 1
    assert demo.usage.express_transitions == len(demo.states) - len(own) > demo.usage.state_transitions
    # rounded up to 100 ms at one 64 MB chunk each
    assert demo.usage.express_gb_seconds >= len(segments) * 0.1 * 64 / 1024


def test_lambda_requests_are_the_stage_invocations(demo: Metered, cloud: LocalCloud) -> None:
    # Then every stage Task the execution entered is one invocation of that stage's function,
    # and the status function hears once that the execution ended
    capability = registry.load("code_analysis")
    stages = stage_tasks(demo.states, capability)
    expected = Counter(stage_function_name(cloud.prefix, "code_analysis", stage) for stage in stages)
    expected[f"{cloud.prefix}-status"] = 1
    assert Counter(i.function_name for i in demo.invocations) == expected
    # each stage's task, and the status function once, when the execution's end is reported
    lambda_tasks = sum(
        e["type"] == "TaskStateEntered" and not e["stateEnteredEventDetails"]["name"].startswith("segment")
        for e in demo.history
    )
    assert demo.usage.lambda_requests == len(stages) + 1 == lambda_tasks + 1
    # and each is billed its measured duration at its configured memory
    memory = {
        stage_function_name(cloud.prefix, "code_analysis", agent.name): agent.memory_mb
        for agent in capability.pipeline.agents
    }
    memory[f"{cloud.prefix}-status"] = 256  # the emulation's service functions
    assert all(i.memory_mb == memory[i.function_name] for i in demo.invocations)
    billed = sum(lambda_gb_seconds(i.duration_ms, i.memory_mb) for i in demo.invocations)
    assert demo.usage.lambda_gb_seconds == pytest.approx(billed) and billed > 0


def test_dynamodb_reads_and_writes_are_counted(demo: Metered) -> None:
    # Then the mission's checkpoints, events and record cost write units, and its reads read units
    assert demo.usage.dynamodb_write_units >= demo.usage.lambda_requests  # at least a checkpoint a stage
    assert demo.usage.dynamodb_read_units > 0
    # and the split per table and index adds up to them
    assert sum(sum(parts.values()) for parts in demo.writes.values()) == demo.usage.dynamodb_write_units


def test_a_stage_writes_one_event_item_and_no_index_of_the_missions_table(demo: Metered) -> None:
    # Given the demo's stages
    stages = sum(e["type"] == "TaskStateEntered" for e in demo.history)
    # Then each stage's events were one small item (a write unit or two, not one per event)
    assert demo.writes["events"]["table"] <= 2 * stages
    # and the record's summary indexes were written by its changes of status (created, running, ended), not
    # by the update each stage makes
    missions = demo.writes["missions"]
    assert missions["by_user"] == missions["by_capability"] <= 4 < stages
    assert missions["by_status"] == 1  # it entered the index of ended missions once


def test_only_the_final_stage_writes_the_missions_record(demo: Metered, cloud: LocalCloud) -> None:
    # Given the demo's stage functions, by what each wrote
    final = registry.load("code_analysis").pipeline.final
    stages = {
        source: found for source, found in demo.sources.items() if source.startswith(f"{cloud.prefix}-code-analysis-")
    }
    assert len(stages) >= 5
    # Then a stage that is not the last wrote its checkpoint and its events, and nothing of the record (its
    # progress is in its checkpoint), and the final stage wrote the record's end
    for source, found in stages.items():
        wrote_record = found.writes.get("missions", 0)
        assert found.writes["checkpoints"] >= 1 and found.writes["events"] >= 1
        assert (wrote_record > 0) == source.endswith(final.replace("_", "-")), (source, found.writes)


def test_the_mission_costs_something_and_less_than_a_cent(demo: Metered) -> None:
    # When its usage is priced
    cost = estimate(demo.usage)
    # Then it is positive, below a cent, and the sum of its lines
    assert 0 < cost.total < 0.01
    assert cost.lines["step_functions"] > 0 and cost.lines["dynamodb_writes"] > 0
    assert cost.lines["express_requests"] > 0 and cost.lines["express_duration"] > 0
    assert cost.total == pytest.approx(sum(cost.lines.values()))


def test_watching_a_mission_is_not_its_cost(cloud: LocalCloud, demo: Metered) -> None:
    # Given a meter, and the harness polling a finished mission as a client would
    with Meter(cloud) as meter:
        for _ in range(3):
            cloud.status(demo.outcome.mission_id)
        cloud.events(demo.outcome.mission_id)
        cloud.history(demo.outcome.mission_id)
    # Then nothing was counted
    assert meter.usage() == Usage()


def test_an_answered_interrupt_bills_the_interrupt_function_and_the_answer(cloud: LocalCloud) -> None:
    # Given a mission that asks a human, metered from its start
    with Meter(cloud) as meter:
        with meter.billed():
            mission_id = cloud.start("code_analysis", "help", context={"repo": str(REPO_ROOT)})
        assert cloud.wait(mission_id, WAIT, until_interrupt=True) == "INTERRUPTED"
        [record] = cloud.runtime.interrupts.pending(mission_id)
        before = meter.usage().dynamodb_write_units
        # When the answer is given (in AWS, by the API Lambda)
        with meter.billed():
            cloud.answer(mission_id, record.interrupt_id, {"text": "the billing module"})
        answered = meter.usage().dynamodb_write_units
        assert cloud.wait(mission_id, WAIT) == "SUCCEEDED"
        usage = meter.usage_for(mission_id)
    # Then the answer's writes were counted, and the interrupt's function once among the tasks
    assert answered > before
    names = Counter(i.function_name for i in meter.invocations)
    assert names[f"{cloud.prefix}-interrupt"] == 1
    # (a Lambda task each, in the segments and on the mission's machine; a segment's calls to Step Functions are not)
    tasks = sum(
        e["type"] == "TaskStateEntered" and not e["stateEnteredEventDetails"]["name"].startswith("segment")
        for e in cloud.history(mission_id)
    )
    assert usage.lambda_requests == tasks + 1  # and the status function, once


def test_usage_for_refuses_when_a_second_mission_ran(cloud: LocalCloud) -> None:
    # Given two missions started under one meter
    with Meter(cloud) as meter:
        ids = [cloud.start("code_analysis", "help", context={"repo": str(REPO_ROOT)}) for _ in range(2)]
        for mission_id in ids:  # both ask a human: answer them, so nothing runs on after this test
            cloud.wait(mission_id, WAIT, until_interrupt=True)
            [record] = cloud.runtime.interrupts.pending(mission_id)
            cloud.answer(mission_id, record.interrupt_id, {"text": "the billing module"})
            assert cloud.wait(mission_id, WAIT) == "SUCCEEDED"
        # When the usage of one is asked / Then the meter refuses to blame it for both
        with pytest.raises(ValueError, match="one mission at a time"):
            meter.usage_for(ids[0])


# =========================================================================== exact counts


def _delivery(body_bytes: int, delivery_id: str = "d-1") -> dict[str, Any]:
    """An item of the deliveries table (no sort key, no index) of a known size."""
    return {"delivery_id": {"S": delivery_id}, "body": {"S": "x" * body_bytes}}


def test_a_put_item_of_known_size_is_counted_exactly(cloud: LocalCloud) -> None:
    # Given an item of exactly 1 KB + 1 byte
    table = cloud.settings.deliveries_table
    item = _delivery(1025 - len("delivery_id") - len("d-1") - len("body"))
    assert item_size(item) == 1025
    with Meter(cloud) as meter:
        # When it is put, then read strongly and eventually consistently, on the mission's behalf
        with meter.billed():
            cloud.dynamodb.put_item(TableName=table, Item=item)
            cloud.dynamodb.get_item(TableName=table, Key={"delivery_id": {"S": "d-1"}}, ConsistentRead=True)
            cloud.dynamodb.get_item(TableName=table, Key={"delivery_id": {"S": "d-1"}})
        # and once more outside the mission (the harness's own call)
        cloud.dynamodb.put_item(TableName=table, Item=item)
    # Then the put cost 2 write units, the reads 1 + 0.5 read units, and the harness's put nothing
    assert meter.usage() == Usage(dynamodb_write_units=2, dynamodb_read_units=1.5)


def test_the_floor_is_what_the_same_writes_cost_unrounded(cloud: LocalCloud) -> None:
    # Given a meter, an item of 1 KB + 1 byte, one of 100 bytes, and a mission item two indexes hold
    big, small = _delivery(1025 - len("delivery_id") - len("d-1") - len("body")), _delivery(50, "d-3")
    with Meter(cloud) as meter, meter.billed():
        # When each is put
        cloud.dynamodb.put_item(TableName=cloud.settings.deliveries_table, Item=big)
        cloud.dynamodb.put_item(TableName=cloud.settings.deliveries_table, Item=small)
        cloud.dynamodb.put_item(TableName=cloud.settings.missions_table, Item=_mission_item("m-floor"))
    # Then the big item is 2 units rounded and 1025/1024 unrounded, the small one 1 either way (a write
    # is never less), and the mission's record 1 with an index entry each (3 item writes)
    floor = meter.write_floor_by_table()
    assert meter.write_units_by_table()["deliveries"] == {"table": 3}
    assert floor["deliveries"] == {"items": 2, "units": pytest.approx(1025 / 1024 + 1)}
    assert floor["missions"] == {"items": 3, "units": 3.0}


def test_updates_and_deletes_cost_the_larger_item_before_or_after(cloud: LocalCloud) -> None:
    # Given a 100-byte item
    table, key = cloud.settings.deliveries_table, {"delivery_id": {"S": "d-2"}}
    cloud.dynamodb.put_item(TableName=table, Item=_delivery(80, "d-2"))
    with Meter(cloud) as meter, meter.billed():
        # When an update grows it past 2 KB (a request far smaller than the item)
        cloud.dynamodb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET body = :b",
            ExpressionAttributeValues={":b": {"S": "y" * 2100}},
        )
        grown = meter.usage().dynamodb_write_units
        # and it is deleted
        cloud.dynamodb.delete_item(TableName=table, Key=key)
    # Then each cost the 3 units of the > 2 KB item
    assert grown == 3
    assert meter.usage().dynamodb_write_units == 6


def test_batches_queries_and_transactions_are_priced_by_their_rules(cloud: LocalCloud) -> None:
    # Given two items of 1 KB + 1 byte (2 write units, one started 4 KB to read)
    table = cloud.settings.deliveries_table
    items = [_delivery(1025 - len("delivery_id") - len("b-1") - len("body"), f"b-{n}") for n in (1, 2)]
    keys = [{"delivery_id": item["delivery_id"]} for item in items]
    with Meter(cloud) as meter, meter.billed():
        # When they are batch-written, then one is rewritten in a transaction
        cloud.dynamodb.batch_write_item(RequestItems={table: [{"PutRequest": {"Item": item}} for item in items]})
        cloud.dynamodb.transact_write_items(TransactItems=[{"Put": {"TableName": table, "Item": items[0]}}])
        writes = meter.usage().dynamodb_write_units
        # and read back: a batch (eventually consistent), a transaction, a consistent query
        cloud.dynamodb.batch_get_item(RequestItems={table: {"Keys": keys}})
        batch = meter.usage().dynamodb_read_units
        cloud.dynamodb.transact_get_items(TransactItems=[{"Get": {"TableName": table, "Key": key}} for key in keys])
        transaction = meter.usage().dynamodb_read_units - batch
        cloud.dynamodb.query(
            TableName=table,
            KeyConditionExpression="delivery_id = :d",
            ExpressionAttributeValues={":d": {"S": "b-1"}},
            ConsistentRead=True,
        )
    # Then the batch cost 2 + 2 write units and the transaction twice 2
    assert writes == 4 + 4
    # and the batch read 0.5 a key, the transaction 2 a key, the query 1 for its one item
    assert (batch, transaction) == (1.0, 4.0)
    assert meter.usage().dynamodb_read_units == 1.0 + 4.0 + 1.0


def _mission_item(mission_id: str, **extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "mission_id": {"S": mission_id},
        "user_id": {"S": "u"},
        "capability": {"S": "code_analysis"},
        "goal": {"S": "g"},
        "status": {"S": "running"},
        "created_at": {"S": utcnow()},
        **extra,
    }


def _units(meter: Meter) -> dict[str, int]:
    return meter.write_units_by_table().get("missions", {})


def test_a_put_costs_each_index_holding_the_item_one_write_of_its_entry(cloud: LocalCloud) -> None:
    # Given a mission record of 3 KB (a long result), which by_user and by_capability hold (its summary) and
    # by_status does not (no completed_at)
    item = _mission_item("m-put", result={"S": "r" * 2900})
    assert 2048 < item_size(item) <= 3072
    with Meter(cloud) as meter, meter.billed():
        # When it is put
        cloud.dynamodb.put_item(TableName=cloud.settings.missions_table, Item=item)
    # Then the table bills the item (3 units) and each summary index one unit for its small entry
    assert _units(meter) == {"table": 3, "by_user": 1, "by_capability": 1, "by_status": 0}
    assert meter.usage().dynamodb_write_units == 5


def test_an_update_of_attributes_no_index_holds_writes_the_table_alone(cloud: LocalCloud) -> None:
    # Given a running mission's record
    table, key = cloud.settings.missions_table, {"mission_id": {"S": "m-stage"}}
    cloud.dynamodb.put_item(TableName=table, Item=_mission_item("m-stage"))
    with Meter(cloud) as meter, meter.billed():
        # When a stage sets its stage, counters and next stage, and writes its status unchanged
        cloud.dynamodb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET stage = :s, counters = :c, next_stage = :n, #st = :running",
            ExpressionAttributeNames={"#st": "status"},
            ExpressionAttributeValues={
                ":s": {"S": "plan"},
                ":c": {"M": {"agent_hops": {"N": "1"}}},
                ":n": {"S": "analyze"},
                ":running": {"S": "running"},
            },
        )
    # Then only the table is written
    assert _units(meter) == {"table": 1, "by_user": 0, "by_capability": 0, "by_status": 0}


def test_an_index_pays_for_a_projected_change_and_twice_for_a_moved_key(cloud: LocalCloud) -> None:
    # Given a running mission's record
    table, key = cloud.settings.missions_table, {"mission_id": {"S": "m-end"}}
    cloud.dynamodb.put_item(TableName=table, Item=_mission_item("m-end"))
    with Meter(cloud) as meter, meter.billed():
        # When it completes (its status, projected, changes; completed_at puts it into by_status)
        cloud.dynamodb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET #st = :done, completed_at = :at",
            ExpressionAttributeNames={"#st": "status"},
            ExpressionAttributeValues={":done": {"S": "completed"}, ":at": {"S": utcnow()}},
        )
        ended = _units(meter)
        # and is archived (by_status's partition key changes: its entry moves)
        cloud.dynamodb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET #st = :archived",
            ExpressionAttributeNames={"#st": "status"},
            ExpressionAttributeValues={":archived": {"S": "archived"}},
        )
        archived = _units(meter)
        # and a condition that fails, then a delete
        with pytest.raises(cloud.dynamodb.exceptions.ConditionalCheckFailedException):
            cloud.dynamodb.update_item(
                TableName=table,
                Key=key,
                UpdateExpression="SET #st = :x",
                ConditionExpression="#st = :running",
                ExpressionAttributeNames={"#st": "status"},
                ExpressionAttributeValues={":x": {"S": "failed"}, ":running": {"S": "running"}},
            )
        failed = _units(meter)
        cloud.dynamodb.delete_item(TableName=table, Key=key)
    # Then completing wrote each summary index once and put the entry into by_status
    assert ended == {"table": 1, "by_user": 1, "by_capability": 1, "by_status": 1}
    # archiving wrote the summary indexes once more and by_status twice (a delete and a put)
    assert archived == {"table": 2, "by_user": 2, "by_capability": 2, "by_status": 3}
    # the failed condition wrote the table (AWS bills it) and no index
    assert failed == {"table": 3, "by_user": 2, "by_capability": 2, "by_status": 3}
    # and the delete took the item out of every index holding it
    assert _units(meter) == {"table": 4, "by_user": 3, "by_capability": 3, "by_status": 4}


def test_a_keys_only_index_costs_its_small_entry_whatever_the_item(cloud: LocalCloud) -> None:
    # Given a 5 KB memory item of a user under a namespace head (both its indexes hold keys only)
    item = {
        "owner": {"S": "u#preferences"},
        "key": {"S": "k"},
        "namespace_head": {"S": "preferences"},
        "user_id": {"S": "u"},
        "value": {"S": "v" * 5000},
    }
    with Meter(cloud) as meter, meter.billed():
        # When it is put, then its value alone is rewritten
        cloud.dynamodb.put_item(TableName=cloud.settings.memory_table, Item=item)
        cloud.dynamodb.put_item(TableName=cloud.settings.memory_table, Item={**item, "value": {"S": "w" * 5000}})
    # Then the table bills 5 units twice, each index one unit for the put and nothing for the rewrite
    assert meter.write_units_by_table()["memory"] == {"table": 10, "by_namespace_head": 1, "memory_by_user": 1}


def test_s3_requests_and_published_events_are_counted(cloud: LocalCloud) -> None:
    # Given a meter
    with Meter(cloud) as meter, meter.billed():
        # When an object is written and read, and two events are published
        cloud.s3.put_object(Bucket=cloud.settings.blob_bucket, Key="metered", Body=b"blob")
        cloud.s3.get_object(Bucket=cloud.settings.blob_bucket, Key="metered")["Body"].read()
        entry = {"Source": "tests.metering", "DetailType": "probe", "Detail": json.dumps({"n": 1})}
        cloud.events_client.put_events(Entries=[{**entry, "EventBusName": cloud.settings.event_bus}] * 2)
    # Then one PUT, one GET and two events are billed
    assert meter.usage() == Usage(s3_puts=1, s3_gets=1, events_published=2)


# =========================================================================== the patches' hook


def _probe_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("handler.py", "def lambda_handler(event, context):\n    raise RuntimeError('in-process')\n")
    return buffer.getvalue()


def test_every_invocation_is_observed_with_its_memory_even_when_it_fails(cloud: LocalCloud) -> None:
    # Given a 512 MB function whose handler reports which function runs, or fails when asked
    name = "metering-probe"
    cloud.lambda_.create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=cloud.iam.get_role(RoleName=f"{cloud.prefix}-role")["Role"]["Arn"],
        Handler="handler.lambda_handler",
        Code={"ZipFile": _probe_zip()},
        MemorySize=512,
    )

    def handler(event: dict[str, Any], context: Any) -> Any:
        if event.get("fail"):
            raise RuntimeError("asked to fail")
        return {"invoking": moto_patches.invoking()}

    moto_patches.register(name, handler)
    seen: list[tuple[str, float, int]] = []
    stop = moto_patches.observe(lambda *call: seen.append(call))
    try:
        # When it is invoked twice, the second time failing, then once more after observing stops
        ok = cloud.lambda_.invoke(FunctionName=name, Payload=json.dumps({}))
        failed = cloud.lambda_.invoke(FunctionName=name, Payload=json.dumps({"fail": True}))
        stop()
        cloud.lambda_.invoke(FunctionName=name, Payload=json.dumps({}))
    finally:
        stop()
        moto_patches.unregister(name)
    # Then the handler knew it ran as the function, the harness does not
    assert json.loads(ok["Payload"].read()) == {"invoking": name}
    assert "FunctionError" in failed and moto_patches.invoking() is None
    # and both observed invocations were reported with the function's memory, the third not
    assert [(n, memory) for n, _, memory in seen] == [(name, 512), (name, 512)]
    assert all(duration >= 0 for _, duration, _ in seen)


def test_the_cost_model_predicts_the_metered_demo_within_10_percent(demo: Metered):
    """If this fails after a change to what a stage writes or reads, re-tune missions.core.cost.figures:
    `python -c "from bench import cost; print(cost.run())"` prints the metered figures next to the table's."""
    from missions.core.cost.prediction import predict

    # Given the demo mission, metered (its path: one replan, as the capability's typical_count says)
    metered = estimate(demo.usage).total
    # When its cost is predicted from the compiled machine and the per-stage figures
    prediction = predict(registry.load("code_analysis").pipeline)
    walk = prediction.walks["typical"]
    # Then the machine's counts are exact, and the dollars within 10%
    assert walk.standard_transitions == demo.usage.state_transitions
    assert walk.express_transitions == demo.usage.express_transitions
    assert len(walk.invocations) + 1 == demo.usage.lambda_requests  # the stages, and the status function
    assert abs(prediction.typical.total / metered - 1) <= 0.10, (prediction.typical.lines, estimate(demo.usage).lines)
