"""Pricing a mission's usage: DynamoDB's item size and unit rules, Lambda GB-seconds, dollars."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from missions.core.capability import registry
from missions.core.cost.figures import FIGURES
from missions.core.cost.infrastructure import (
    PRICES,
    PRICES_AS_OF,
    Usage,
    attribute_size,
    billed_events,
    estimate,
    express_gb_seconds,
    item_size,
    lambda_gb_seconds,
    number_size,
    read_units,
    write_units,
)
from missions.core.cost.prediction import PATHS, predict
from missions.core.pipeline.config import PipelineConfig

ROOT = Path(__file__).resolve().parents[3]

# =========================================================================== item sizes


@pytest.mark.parametrize(
    ("value", "size"),
    [
        ({"S": "abc"}, 3),
        ({"S": "é"}, 2),  # UTF-8 bytes, not characters
        ({"N": "123.45"}, 4),  # 5 significant digits -> 3 bytes, + 1
        ({"N": "0.0100"}, 2),  # leading and trailing zeros trimmed: 1 digit
        ({"N": "-1E+5"}, 2),
        ({"B": b"\x00" * 10}, 10),  # raw bytes, as boto3 sends them
        ({"B": "AAAA"}, 3),  # DynamoDB's JSON wire form: base64, counted decoded
        ({"BOOL": True}, 1),
        ({"NULL": True}, 1),
        ({"SS": ["a", "bb"]}, 3),
        ({"NS": ["1", "22"]}, 4),
        ({"M": {}}, 3),  # an empty map or list is its overhead
        ({"L": []}, 3),
        ({"L": [{"N": "1"}]}, 3 + 1 + 2),  # overhead + 1 byte per element + the element
        ({"M": {"a": {"S": "xy"}}}, 3 + 1 + 1 + 2),  # ... and the element's name
        ({"M": {"l": {"L": [{"S": "x"}]}}}, 3 + 1 + 1 + (3 + 1 + 1)),
    ],
)
def test_attribute_sizes_follow_dynamodb_rules(value: dict, size: int) -> None:
    # Given a typed value / When it is sized / Then it has the documented size
    assert attribute_size(value) == size


def test_an_item_is_its_names_plus_its_values() -> None:
    # Given an item of a string key and a number / When sized / Then names count as UTF-8 too
    assert item_size({"id": {"S": "m-1"}, "n": {"N": "42"}}) == (2 + 3) + (1 + 2)


def test_an_unknown_type_is_refused() -> None:
    with pytest.raises(ValueError):
        attribute_size({"X": 1})


def test_number_sizes_grow_one_byte_per_two_digits() -> None:
    assert [number_size(n) for n in ("0", "7", "12", "123", "1234")] == [1, 2, 2, 3, 3]


# =========================================================================== units


def test_a_write_costs_one_unit_per_started_kilobyte() -> None:
    # Given items of 0 bytes, exactly 1 KB and 1 KB + 1 byte
    # When their writes are priced / Then they cost 1, 1 and 2 units
    assert [write_units(0), write_units(1024), write_units(1025)] == [1, 1, 2]


def test_a_transactional_write_costs_twice() -> None:
    assert write_units(1025, transactional=True) == 4


def test_reads_cost_per_started_4kb_and_half_when_eventually_consistent() -> None:
    # Given a 4 KB item / When read three ways / Then half a unit, one unit, two units
    assert read_units(4096) == 0.5
    assert read_units(4096, consistent=True) == 1
    assert read_units(4096, transactional=True) == 2
    # and one byte more starts the next 4 KB
    assert read_units(4097, consistent=True) == 2


def test_a_read_of_nothing_still_costs_the_minimum() -> None:
    # a missing item, or a Query that returns no items
    assert read_units(0) == 0.5 and read_units(0, consistent=True) == 1


@given(st.integers(0, 400 * 1024), st.integers(0, 400 * 1024), st.booleans())
def test_units_are_monotonic_in_size_and_a_write_costs_at_least_one(a: int, b: int, transactional: bool) -> None:
    small, large = sorted((a, b))
    assert 1 <= write_units(small, transactional=transactional) <= write_units(large, transactional=transactional)
    assert 0.5 <= read_units(small) <= read_units(large)
    assert read_units(small, consistent=True) <= read_units(large, consistent=True)


@given(st.text(max_size=2000), st.text(min_size=1, max_size=2000))
def test_a_longer_string_never_makes_an_item_cheaper_to_write(text: str, more: str) -> None:
    # Given an item, and the same item with a longer string attribute
    shorter = {"id": {"S": "k"}, "body": {"S": text}}
    longer = {"id": {"S": "k"}, "body": {"S": text + more}}
    # Then its size grows and its write units never fall
    assert item_size(longer) > item_size(shorter)
    assert write_units(item_size(longer)) >= write_units(item_size(shorter))


def test_eventbridge_bills_each_started_64kb_of_an_entry() -> None:
    assert [billed_events(10), billed_events(64 * 1024), billed_events(64 * 1024 + 1)] == [1, 1, 2]


# =========================================================================== Lambda and dollars


def test_lambda_bills_each_started_millisecond_times_memory() -> None:
    # Given 100.2 ms at 1024 MB / Then 101 ms of 1 GB are billed
    assert lambda_gb_seconds(100.2, 1024) == pytest.approx(0.101)
    # and a sub-millisecond call still bills 1 ms
    assert lambda_gb_seconds(0.1, 128) == pytest.approx(0.001 / 8)


def test_express_bills_duration_in_100_ms_steps_and_memory_in_64_mb_chunks() -> None:
    # Given a segment of 1.01 s holding little state / Then 1.1 s of 64 MB
    assert express_gb_seconds(1010) == pytest.approx(1.1 * 64 / 1024)
    # and a short one still bills 100 ms, a big state one more chunk
    assert express_gb_seconds(3) == pytest.approx(0.1 * 64 / 1024)
    assert express_gb_seconds(100, memory_bytes=65 * 1024 * 1024) == pytest.approx(0.1 * 2 * 64 / 1024)


def test_usages_add_up() -> None:
    total = Usage(state_transitions=2, dynamodb_read_units=0.5) + Usage(state_transitions=3, s3_puts=1)
    assert total == Usage(state_transitions=5, dynamodb_read_units=0.5, s3_puts=1)


def test_estimate_prices_each_line_at_list_price() -> None:
    # Given a million of everything (and a thousand transitions)
    usage = Usage(
        state_transitions=1000,
        express_requests=1_000_000,
        express_gb_seconds=1_000_000,
        express_transitions=5,  # shown, never billed
        lambda_requests=1_000_000,
        lambda_gb_seconds=1_000_000,
        dynamodb_read_units=1_000_000,
        dynamodb_write_units=1_000_000,
        s3_puts=1000,
        s3_gets=1000,
        events_published=1_000_000,
    )
    # When priced for arm64
    cost = estimate(usage)
    # Then each line is its published price
    assert cost.lines == pytest.approx(
        {
            "step_functions": 0.025,
            "express_requests": 1.00,
            "express_duration": 16.67,
            "lambda_requests": 0.20,
            "lambda_compute": 13.3334,
            "dynamodb_reads": 0.125,
            "dynamodb_writes": 0.625,
            "s3_puts": 0.005,
            "s3_gets": 0.0004,
            "eventbridge": 1.00,
        }
    )
    assert cost.total == pytest.approx(sum(cost.lines.values()))
    assert cost.prices_as_of == PRICES_AS_OF == PRICES.as_of
    assert cost.quantities["dynamodb_writes"] == 1_000_000
    # and x86_64 compute costs more
    assert estimate(usage, architecture="x86_64").lines["lambda_compute"] == pytest.approx(16.6667)


def test_nothing_used_costs_nothing() -> None:
    assert estimate(Usage()).total == 0


def test_costing_imports_no_sdk() -> None:
    # Given a fresh interpreter / When the costing module is imported / Then no SDK came with it
    sdks = "('boto3', 'botocore', 'moto', 'openai')"
    code = f"import sys, missions.core.cost.infrastructure\nprint(sorted(m for m in {sdks} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


# =========================================================================== the cost model (prediction)


def _pipeline(agents: list[dict[str, object]], **more: object) -> PipelineConfig:
    return PipelineConfig.model_validate({"name": "p", "agents": agents, **more})


LINEAR = [
    {"name": "a", "has_llm": True, "default_next": "b"},
    {"name": "b", "has_tools": True, "tool_access": "read", "default_next": "c"},
    {"name": "c"},
]


def test_a_linear_pipeline_has_one_path_priced_from_the_figures():
    # Given a -> b -> c, each stage one kind of the figures'
    pipeline = _pipeline(LINEAR)
    # When its cost is predicted
    prediction = predict(pipeline)
    # Then min, typical and max are the same 3 stage runs, in one segment of 3 Standard transitions
    walks = prediction.walks
    assert [walks[name].invocations for name in PATHS] == [["a", "b", "c"]] * 3
    assert prediction.two_level and walks["typical"].standard_transitions == 3
    assert len(walks["typical"].segments) == 1 and walks["typical"].express_transitions > 9
    # and the usage is the figures' per kind, plus the mission's start and end
    kinds = [FIGURES.stages[k] for k in ("llm", "tools", "final")]
    expected = sum(f.write_units for f in kinds) + FIGURES.start.write_units + FIGURES.end.write_units
    usage = prediction.usages["typical"]
    assert usage.dynamodb_write_units == pytest.approx(expected)
    assert usage.lambda_requests == 4 and usage.express_requests == 1  # 3 stages and the status function
    cost = prediction.typical
    assert cost.total == pytest.approx(estimate(usage).total) and set(cost.lines) == set(estimate(Usage()).lines)
    assert prediction.as_dict()["dollars_per_1000_missions"] == pytest.approx(cost.total * 1000, rel=1e-3)


def test_a_loop_runs_its_typical_count_typically_and_its_limit_at_most():
    # Given b -> a looping back, limited to 3 times and typically once
    agents = [
        {"name": "a", "has_llm": True, "default_next": "b"},
        {"name": "b", "routing_rules": [{"field": "again", "value": True, "target": "a"}], "default_next": "c"},
        {"name": "c"},
    ]
    limit = {"from_stage": "b", "to_stage": "a", "max_count": 3, "typical_count": 1}
    prediction = predict(_pipeline(agents, edge_limits=[limit]))
    # Then the range is 0, 1 and 3 rounds of the loop, and costs grow with it
    runs = {name: prediction.walks[name].invocations for name in PATHS}
    assert runs["min"] == ["a", "b", "c"]
    assert runs["typical"] == ["a", "b", "a", "b", "c"]
    assert runs["max"] == ["a", "b"] * 4 + ["c"]
    totals = [prediction.costs[name].total for name in PATHS]
    assert totals == sorted(totals) and totals[0] < totals[2]
    assert any("typically 1 times, at most 3" in said for said in prediction.assumptions)


def test_the_hop_bound_cuts_the_longest_path_through_the_final_stage():
    # Given a loop its edge limit allows far past max_agent_hops
    agents = [
        {"name": "a", "default_next": "b"},
        {"name": "b", "routing_rules": [{"field": "again", "value": True, "target": "a"}], "default_next": "c"},
        {"name": "c"},
    ]
    limit = {"from_stage": "b", "to_stage": "a", "max_count": 100}
    prediction = predict(_pipeline(agents, edge_limits=[limit], bounds={"max_agent_hops": 6}))
    # Then the longest mission runs max_agent_hops stages: the machine's guard ends it through the final stage
    assert len(prediction.walks["max"].invocations) == 6 and prediction.walks["max"].invocations[-1] == "c"
    assert prediction.walks["typical"].invocations == ["a", "b", "c"]  # no typical_count: the loop is not taken


def test_branches_take_the_default_typically_and_the_longer_branch_at_most():
    # Given a that routes to a short or a long branch, both ending at d
    agents = [
        {"name": "a", "routing_rules": [{"field": "long", "value": True, "target": "b1"}], "default_next": "c"},
        {"name": "b1", "default_next": "b2"},
        {"name": "b2", "default_next": "d"},
        {"name": "c", "default_next": "d"},
        {"name": "d"},
    ]
    prediction = predict(_pipeline(agents))
    runs = {name: prediction.walks[name].invocations for name in PATHS}
    assert runs["min"] == ["a", "c", "d"] and runs["typical"] == ["a", "c", "d"]
    assert runs["max"] == ["a", "b1", "b2", "d"]
    said = prediction.as_dict()
    assert said["range"]["max"]["stages"] == 4 and said["assumptions"][0].startswith("typical path (3 stage runs)")


def test_a_parallel_group_runs_each_branch_and_its_join():
    # Given a -> (x, y side by side) -> j -> z
    agents = [
        {"name": "a", "default_next": "both"},
        {"name": "x", "default_next": "j"},
        {"name": "y", "default_next": "j"},
        {"name": "j", "default_next": "z"},
        {"name": "z"},
    ]
    prediction = predict(_pipeline(agents, parallel=[{"name": "both", "stages": ["x", "y"]}]))
    # Then every branch is a stage run of its own
    assert sorted(prediction.walks["typical"].invocations) == ["a", "j", "x", "y", "z"]


def test_a_mission_across_many_segments_pays_the_standard_transitions_of_one():
    # Given a loop that runs 10 rounds typically, in segments of 3 stages
    agents = [
        {"name": "a", "default_next": "b"},
        {"name": "b", "routing_rules": [{"field": "again", "value": True, "target": "a"}], "default_next": "c"},
        {"name": "c"},
    ]
    limit = {"from_stage": "b", "to_stage": "a", "max_count": 20, "typical_count": 10}
    prediction = predict(_pipeline(agents, edge_limits=[limit], segment_hops=3, bounds={"max_agent_hops": 40}))
    walk = prediction.walks["typical"]
    # Then its 23 stage runs take 8 Express segments, each starting the next, and the mission's machine
    # enters its 3 states once: as many Standard transitions as a mission of one segment
    assert len(walk.invocations) == 23 and len(walk.segments) == 8
    assert walk.standard_transitions == 3 == prediction.walks["min"].standard_transitions
    assert prediction.usages["typical"].express_requests == 8


def test_a_pipeline_on_one_standard_machine_pays_every_state():
    # Given a stage that may run longer than a segment allows (one Standard machine)
    agents = [{"name": "a", "default_next": "b", "timeout_seconds": 900}, {"name": "b"}]
    prediction = predict(_pipeline(agents))
    walk = prediction.walks["typical"]
    # Then there is no segment and each stage's task, count and route are Standard transitions
    assert not prediction.two_level and walk.segments == [] and walk.express_transitions == 0
    assert walk.standard_transitions >= 3 * 2 and prediction.typical.lines["express_requests"] == 0


def test_every_installed_capability_is_predicted_with_an_ordered_range():
    names = registry.installed()
    assert names
    for name in names:
        prediction = predict(registry.load(name).pipeline)
        totals = [prediction.costs[path].total for path in PATHS]
        assert 0 < totals[0] <= totals[1] <= totals[2], name
