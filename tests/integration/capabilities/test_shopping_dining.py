"""shopping (Level 1) and dining (Level 2) end to end on the emulation: moto runs the compiled ASL,
the real handlers run in-process, a scripted user answers the choice.

One LocalCloud serves the module. The LLM budget is asserted from the envelope's counters: at
most 2 calls for shopping, 3 to 5 for dining.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from missions.core.capability import registry as registry
from missions.core.capability.registry import Capability
from missions.core.errors import AnswerRejected
from missions.core.mission.envelope import Envelope, InterruptKind
from missions.local.emulation import LocalCloud
from missions.ports.interrupts import InterruptRecord
from missions.service.checkpoints import stage_history
from tests.integration.conftest import stage_tasks, with_capabilities

WAIT = 30.0
SHOPPING_GOAL = "Find the best price for Sony WH-1000XM5 headphones"
DINING_GOAL = "Find an Italian restaurant for a weeknight dinner for 2"


def _impatient_dining() -> Capability:
    """dining as shipped, but nobody waits more than 2 s for the choice."""
    dining = registry.load("dining")
    name = "t_dining_impatient"
    pipeline = dining.pipeline.model_copy(update={"name": name, "interrupt_timeout_seconds": 2})
    return dataclasses.replace(dining, name=name, pipeline=pipeline)


IMPATIENT = _impatient_dining()


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    names, known = with_capabilities(IMPATIENT)
    with LocalCloud(["shopping", "dining", *names], registry=known) as local:
        yield local


def wait_for_choice(cloud: LocalCloud, mission_id: str) -> InterruptRecord:
    status = cloud.wait(mission_id, timeout=WAIT, until_interrupt=True)
    if status != "INTERRUPTED":
        envelope = cloud.outcome(mission_id).envelope
        pytest.fail(f"the mission never asked: {status}, {envelope and (envelope.terminal_reason, envelope.errors)}")
    [record] = cloud.runtime.interrupts.pending(mission_id)
    return record


def finish(cloud: LocalCloud, mission_id: str) -> Envelope:
    assert cloud.wait(mission_id, timeout=WAIT) == "SUCCEEDED"
    envelope = cloud.outcome(mission_id).envelope
    assert envelope is not None
    return envelope


def ran(cloud: LocalCloud, mission_id: str) -> list[str]:
    """The stages the mission ran, in order, as its checkpoints recorded them."""
    return [record.stage for record in stage_history(cloud.runtime.checkpoints, mission_id)]


def choose(cloud: LocalCloud, capability: str, goal: str, pick: Any, **start: Any) -> tuple[InterruptRecord, Envelope]:
    """Start a mission, wait for its choice, answer with `pick(options)`, and return the finished envelope."""
    mission_id = cloud.start(capability, goal, **start)
    record = wait_for_choice(cloud, mission_id)
    cloud.answer(mission_id, record.interrupt_id, {"decision": pick(record.options)})
    return record, finish(cloud, mission_id)


# =========================================================================== shopping


def test_shopping_pauses_for_the_choice_and_completes_with_the_chosen_offer(cloud: LocalCloud) -> None:
    # Given a shopping goal
    mission_id = cloud.start("shopping", SHOPPING_GOAL)
    # When the mission has looked up the sellers
    record = wait_for_choice(cloud, mission_id)
    # Then it waits for the user's choice among the cheapest offers, at the present stage
    assert (record.kind, record.stage) == (InterruptKind.CHOICE, "present")
    assert record.options == ["soundsaver", "bh", "amazon", "none"]
    assert "Amazon: $349.00" in record.question
    assert cloud.runtime.missions.get(mission_id).status == "interrupted"
    # And an option that was not offered is refused
    with pytest.raises(AnswerRejected):
        cloud.answer(mission_id, record.interrupt_id, {"decision": "walmart"})

    # When the user picks Amazon
    cloud.answer(mission_id, record.interrupt_id, {"decision": "amazon"})
    envelope = finish(cloud, mission_id)

    # Then the mission completes with that offer as its result
    assert envelope.terminal_reason == "completed" and not envelope.errors
    output = envelope.output("complete")
    assert output["chosen"]["id"] == "amazon" and output["chosen"]["total"] == 349.0
    assert "Amazon" in output["answer"] and output["declined"] is False
    assert [o["id"] for o in output["options"]] == ["soundsaver", "bh", "amazon"]
    result = cloud.runtime.missions.get(mission_id).result
    assert result is not None and result["output"]["chosen"]["id"] == "amazon"
    # And it ran execute -> present -> complete, resuming at complete, within its LLM budget (at most 2)
    assert ran(cloud, mission_id) == ["execute", "present", "complete"]
    assert envelope.counters.llm_calls == 2 and envelope.counters.tool_calls == 1


def test_shopping_filters_by_stored_preferences(cloud: LocalCloud) -> None:
    # Given a user who buys from verified retailers only, within $360
    preferences = {"trusted_retailers_only": True, "budget": 360}
    # When they shop and take the first option
    record, envelope = choose(
        cloud, "shopping", SHOPPING_GOAL, lambda options: options[0], context={"preferences": preferences}
    )
    # Then the marketplace sellers and the over-budget offers were never offered
    assert record.options == ["bh", "amazon", "none"]
    output = envelope.output("complete")
    assert all(option["trusted"] and option["total"] <= 360 for option in output["options"])
    assert output["chosen"]["id"] == "bh"
    assert {line.split(":")[0] for line in output["applied_preferences"]} == {"trusted_retailers_only", "budget"}


def test_shopping_price_service_down_is_retried_then_reported(cloud: LocalCloud) -> None:
    # Given the price-comparison service failing more often than it is retried
    outcome = cloud.run("shopping", SHOPPING_GOAL, context={"simulate_failures": {"price_comparison": 5}}, timeout=WAIT)
    # Then the mission still completes, without asking, and says why there is nothing to choose
    assert outcome.status == "SUCCEEDED" and outcome.envelope is not None
    envelope = outcome.envelope
    assert envelope.terminal_reason == "completed"
    assert ran(cloud, envelope.mission_id) == ["execute", "present", "complete"] and not envelope.answers
    output = envelope.output("complete")
    assert output["source"] == {
        "source": "price_comparison",
        "ok": False,
        "count": 0,
        "error": "failed after 3 attempts: simulated outage",
        "attempts": 3,
    }
    assert "could not be reached" in output["answer"] and output["chosen"] is None
    assert [(e.stage, e.kind) for e in envelope.errors] == [("execute", "source_failed")]
    assert envelope.counters.llm_calls <= 2


def test_shopping_recovers_from_one_transient_failure(cloud: LocalCloud) -> None:
    record, envelope = choose(
        cloud, "shopping", SHOPPING_GOAL, lambda _: "none", context={"simulate_failures": {"price_comparison": 1}}
    )
    output = envelope.output("complete")
    assert output["source"]["ok"] and output["source"]["attempts"] == 2
    assert output["declined"] is True and output["chosen"] is None and "none of the 3" in output["answer"]


# =========================================================================== dining


def test_dining_queries_three_sources_in_parallel_ranks_and_completes_with_the_choice(cloud: LocalCloud) -> None:
    # Given a dining goal / When the user takes the second option
    record, envelope = choose(cloud, "dining", DINING_GOAL, lambda options: options[1])
    mission_id = envelope.mission_id

    # Then the three sources ran as one Parallel state, between plan and aggregate
    states = list(cloud.iter_states(mission_id))
    assert "parallel.maps+reviews+reservations" in states
    assert stage_tasks(states, registry.load("dining"))[:2] == ["plan", "aggregate"]
    assert set(ran(cloud, mission_id)) >= {"maps", "reviews", "reservations"}

    # And the aggregate merged the sources' duplicates and kept what fits the plan
    aggregate = envelope.output("aggregate")
    assert aggregate["failed_sources"] == [] and aggregate["duplicates_merged"] > 0
    assert aggregate["unique"] == aggregate["listings"] - aggregate["duplicates_merged"]
    # And the top 3 are ordered by the composite score
    top = envelope.output("rank")["top"]
    assert [o["score"] for o in top] == sorted((o["score"] for o in top), reverse=True)
    assert all(o["note"] for o in top)  # the ranker's note on each option
    assert record.options == [o["id"] for o in top] + ["none"] and record.kind is InterruptKind.CHOICE

    # And the mission completed with the chosen restaurant, within 3 to 5 LLM calls
    output = envelope.output("complete")
    assert envelope.terminal_reason == "completed" and not envelope.errors
    assert output["chosen"]["id"] == record.options[1] == "osteria-roma"
    assert "Osteria Roma" in output["answer"]
    assert 3 <= envelope.counters.llm_calls <= 5
    assert envelope.counters.llm_calls == 3 and envelope.counters.tool_calls == 3


def test_dining_a_failed_source_is_reported_and_the_others_still_answer(cloud: LocalCloud) -> None:
    # Given the reservations service failing more often than it is retried
    record, envelope = choose(
        cloud, "dining", DINING_GOAL, lambda options: options[0], context={"simulate_failures": {"reservations": 9}}
    )
    # Then the user was still offered restaurants (from maps and reviews) and the mission completed
    assert len(record.options) == 4 and envelope.terminal_reason == "completed"
    output = envelope.output("complete")
    assert output["failed_sources"] == ["reservations"]
    failed = next(s for s in output["sources"] if s["source"] == "reservations")
    assert failed == {
        "source": "reservations",
        "ok": False,
        "count": 0,
        "error": "failed after 3 attempts: simulated outage",
        "attempts": 3,
    }
    assert "reservations (failed after 3 attempts" in output["answer"]
    # And without the reservations service no table is known: availability counts as "walk in or call"
    assert all(o["components"]["availability"] == 0.5 and o["table"] == "walk in or call" for o in output["options"])
    assert [(e.stage, e.kind) for e in envelope.errors] == [("reservations", "source_failed")]
    assert 3 <= envelope.counters.llm_calls <= 5


def test_dining_with_nothing_that_fits_completes_without_asking(cloud: LocalCloud) -> None:
    outcome = cloud.run("dining", "A vegan French dinner on Tuesday under $20", timeout=WAIT)
    assert outcome.status == "SUCCEEDED" and outcome.envelope is not None
    envelope = outcome.envelope
    assert not envelope.answers and envelope.output("present") == {
        "asked": False,
        "reason": "no restaurant fits the criteria",
    }
    assert envelope.output("complete")["answer"].startswith("No restaurant fits french")


def test_dining_an_unanswered_choice_ends_through_complete_with_the_options(cloud: LocalCloud) -> None:
    # Given a dining mission whose choice nobody answers within the interrupt timeout (2 s)
    outcome = cloud.run(IMPATIENT.name, DINING_GOAL, timeout=WAIT)
    # Then it ends through its final stage, saying no choice was made and what the options were
    assert outcome.status == "SUCCEEDED" and outcome.envelope is not None
    envelope = outcome.envelope
    assert envelope.terminal_reason == "interrupt_timeout"
    output = envelope.output("complete")
    assert output["chosen"] is None and len(output["options"]) == 3
    assert output["answer"].startswith("No choice was made before the mission ended (interrupt_timeout)")
    assert cloud.runtime.missions.get(outcome.mission_id).status == "failed"
