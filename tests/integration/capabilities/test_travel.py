"""The travel capability (Level 3) end to end on the local emulation: deep planning, coordinators
in dependency order fanning out to their workers, a choice, versioned drafts, review rounds that
re-run only the coordinator the feedback is about, the review loop's edge limit, and a source
outage that is retried, then reported.

One LocalCloud serves the module; three missions run on it (about 30 s in all).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from missions.core.mission.envelope import Envelope, InterruptKind
from missions.core.mission.events import Event, EventType
from missions.local.emulation import LocalCloud
from missions.ports.interrupts import InterruptRecord
from missions.service.checkpoints import states

WAIT = 60.0
GOAL = "Plan a 5-day Paris trip for May 2026, budget $3000, 2 travelers"
MAX_LLM_CALLS = 20


@dataclass
class Journey:
    """A mission driven to its end by scripted answers, with every question it asked."""

    mission_id: str
    envelope: Envelope
    asked: list[InterruptRecord] = field(default_factory=list)


def drive(cloud: LocalCloud, answers: list[dict[str, Any]], **start: Any) -> Journey:
    """Start a travel mission and answer its interrupts in order; fail if it asks more or fewer. A
    {"note": text} is a note sent while the next question waits (missions.core.mission.notes), not an answer."""
    mission_id = cloud.start("travel", start.pop("goal", GOAL), **start)
    asked: list[InterruptRecord] = []
    for answer in answers:
        if "note" in answer:
            cloud.wait(mission_id, timeout=WAIT, until_interrupt=True)
            cloud.runtime.control.note(cloud.runtime.missions.get(mission_id), answer["note"])
            continue
        status = cloud.wait(mission_id, timeout=WAIT, until_interrupt=True)
        assert status == "INTERRUPTED", (status, cloud.outcome(mission_id).envelope)
        [record] = cloud.runtime.interrupts.pending(mission_id)
        asked.append(record)
        response = dict(answer)
        if response.pop("pick", None) is not None:  # a CHOICE answered by position, as a user clicks
            response["decision"] = record.options[answer["pick"]]
        cloud.answer(mission_id, record.interrupt_id, response)
    assert cloud.wait(mission_id, timeout=WAIT) == "SUCCEEDED"
    envelope = cloud.outcome(mission_id).envelope
    assert envelope is not None
    return Journey(mission_id, envelope, asked)


def revise(text: str) -> dict[str, Any]:
    return {"approved": False, "decision": "revise", "text": text}


APPROVE = {"approved": True}


def events(cloud: LocalCloud, mission_id: str) -> list[Event]:
    return cloud.events(mission_id)[0]


def searched(found: list[Event]) -> list[str]:
    """The coordinator kind of each worker search, in the order the workers ran."""
    return [e.payload["params"]["kind"] for e in found if e.type is EventType.TOOL_STARTED]


def artifact(cloud: LocalCloud, mission_id: str, path: str, version: int | None = None) -> Any:
    return cloud.runtime.artifacts.get(mission_id, path, version).content


def names(cloud: LocalCloud, mission_id: str) -> list[str]:
    return [a.name for a in cloud.runtime.artifacts.list(mission_id)]


def categories(draft: dict[str, Any], research: dict[str, Any]) -> list[str]:
    """The category of every activity a draft schedules."""
    by_id = {o["id"]: o for o in research["options"]}
    return [by_id[i]["category"] for day in draft["days"] for i in day["items"] if i in by_id]


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    with LocalCloud(["travel"]) as local:
        yield local


@pytest.fixture(scope="module")
def journey(cloud: LocalCloud) -> Journey:
    # Given a 5-day Paris trip, whose two best flights are equally good
    # When the traveler picks the first flight, asks for fewer museums and a day trip, then approves
    return drive(cloud, [{"pick": 0}, revise("too many museums, add a day trip"), APPROVE])


# =========================================================================== planning and supervision


def test_the_plan_is_an_artifact_with_coordinators_and_dependencies(cloud: LocalCloud, journey: Journey) -> None:
    # Then the plan was saved as "plan" with the four coordinators and their dependencies
    plan = artifact(cloud, journey.mission_id, "plan")
    depends = {c["name"]: c["depends_on"] for c in plan["coordinators"]}
    assert depends == {
        "flights": [],
        "hotels": ["flights"],
        "activities": ["hotels"],
        "restaurants": ["activities"],
    }
    assert plan["trip"] == {
        "destination": "Paris",
        "origin": "NYC",
        "month": "May",
        "year": 2026,
        "days": 5,
        "travelers": 2,
        "budget_usd": 3000.0,
        "interests": [],
    }
    assert plan["contingencies"] and "## Coordinators" in plan["markdown"]


def test_coordinators_run_in_dependency_order_each_fanning_out_to_its_workers(
    cloud: LocalCloud, journey: Journey
) -> None:
    found = events(cloud, journey.mission_id)
    # Then the workers searched flights, then hotels, then activities and events (restaurants are delegated)
    kinds = searched(found)
    first_round = kinds[: 3 + 3 + 6]
    assert list(dict.fromkeys(first_round)) == ["flights", "hotels", "activities", "events"]
    assert first_round.count("flights") == 3 and first_round.count("activities") == 5

    # And each coordinator's workers ran as one Map (one item per worker), then joined
    states = list(cloud.iter_states(journey.mission_id))
    assert states.count("workers.map") == 4  # three coordinators, then activities again
    assert states.count("workers.item") == len(kinds) == 3 + 3 + 6 + 6
    # and the restaurants were delegated: the dinners stage waited for its sub-mission, then ran with its result
    assert states.count("await.delegation") == 1 and states.count("dinners") == 2
    # And the supervisor started one coordinator at a time, each once its dependency was done
    started = [e.output("supervisor")["running"] for e in checkpoints(cloud, journey.mission_id, "supervisor")]
    assert started == [
        ["flights"],
        ["hotels"],
        ["activities"],
        ["restaurants"],
        [],
        ["activities"],
        [],
    ]


def test_two_equally_good_flights_make_the_traveler_choose(cloud: LocalCloud, journey: Journey) -> None:
    # Then the first question was a CHOICE between the two direct flights
    choice = journey.asked[0]
    assert choice.kind is InterruptKind.CHOICE and choice.stage == "choose"
    assert len(choice.options) == 2 and all("direct" in option for option in choice.options)
    assert choice.data["coordinator"] == "flights" and choice.data["reason"] == "tie"
    # And the flight picked is the one the final itinerary flies
    chosen = choice.data["options"][0]["id"]
    assert f"{chosen}," in artifact(cloud, journey.mission_id, "final")["markdown"]


def test_the_dinners_come_from_a_dining_sub_mission_linked_both_ways(cloud: LocalCloud, journey: Journey) -> None:
    # Then the restaurants were a dining mission of the traveler's own, started by the dinners stage
    record = cloud.runtime.missions.get(journey.mission_id)
    (child_id,) = record.children
    child = cloud.runtime.missions.get(child_id)
    assert child.capability == "dining" and child.user_id == record.user_id and child.status == "completed"
    assert child.parent is not None and child.parent["mission_id"] == journey.mission_id
    assert "Paris" in child.goal and "4 dinner(s)" in child.goal
    # And it asked the traveler nothing: a shortlist, not a choice
    assert not cloud.runtime.interrupts.pending(child_id) and all(q.stage != "present" for q in journey.asked)
    # And its shortlist, in Paris, is what the trip's dinners are: one a night but the last
    shortlist = cloud.outcome(child_id).envelope.output("complete")["options"]
    research = artifact(cloud, journey.mission_id, "research/restaurants", 1)
    assert research["delegated_to"] == "dining" and [o["id"] for o in research["options"]] == [
        o["id"] for o in shortlist
    ]
    assert all(o["source"] == "dining" and o["area"] for o in research["options"])
    final = artifact(cloud, journey.mission_id, "final")
    dinners = [i for day in final["days"] for i in day["items"] if i in {o["id"] for o in shortlist}]
    assert len(dinners) == 4 and "Dinner: " in final["markdown"]
    assert final["cost"]["dinners"] > 0
    # And the timeline says where the dinners came from, and how it ended
    types = [e.type for e in events(cloud, journey.mission_id)]
    assert types.count(EventType.DELEGATION_STARTED) == 1 and types.count(EventType.DELEGATION_ENDED) == 1


# =========================================================================== drafts and review rounds


def test_feedback_reruns_only_the_activities_coordinator_and_redrafts(cloud: LocalCloud, journey: Journey) -> None:
    review = journey.asked[1]
    # Then the first draft was put to review as drafts/itinerary_v1
    assert review.kind is InterruptKind.AGENT_REVIEW and review.stage == "review"
    assert review.options == ["approve", "revise"] and review.data["artifact"]["name"] == "drafts/itinerary_v1"
    assert journey.asked[2].data["artifact"]["name"] == "drafts/itinerary_v2"

    # And after "too many museums, add a day trip" only the activities workers searched again
    found = events(cloud, journey.mission_id)
    answered = next(
        i
        for i, e in enumerate(found)
        if e.type is EventType.INTERRUPT_ANSWERED and e.payload["interrupt_id"] == review.interrupt_id
    )
    assert set(searched(found[answered:])) == {"activities", "events"}
    assert cloud.outputs(journey.mission_id)["replan"]["redo"] == ["activities"]

    # And research was rewritten for activities alone; flights, hotels and restaurants kept v1
    artifacts = names(cloud, journey.mission_id)
    assert "research/activities_v2" in artifacts
    for kept in ("flights", "hotels", "restaurants"):
        assert f"research/{kept}_v1" in artifacts and f"research/{kept}_v2" not in artifacts

    # And drafts/itinerary_v2 differs from v1: fewer museums, a day trip, the same flight and hotel
    v1 = artifact(cloud, journey.mission_id, "drafts/itinerary", 1)
    v2 = artifact(cloud, journey.mission_id, "drafts/itinerary", 2)
    research = artifact(cloud, journey.mission_id, "research/activities", 2)
    assert categories(v1, research).count("museum") >= 3
    assert categories(v2, research).count("museum") <= 1 and "day_trip" in categories(v2, research)
    for kept in ("**Flight:**", "**Hotel:**"):
        assert line(v1["markdown"], kept) == line(v2["markdown"], kept)
    assert v2["version"] == 2 and v2["changes"] and v1["markdown"] != v2["markdown"]


def test_approval_completes_with_a_final_artifact_and_learnings(cloud: LocalCloud, journey: Journey) -> None:
    envelope = journey.envelope
    # Then the mission completed through `complete`, and the approved draft became "final"
    assert envelope.terminal_reason == "completed", envelope.errors
    output = envelope.output("complete")
    assert output["approved"] is True and output["final"] == "final_v1"
    final = artifact(cloud, journey.mission_id, "final")
    v2 = artifact(cloud, journey.mission_id, "drafts/itinerary", 2)
    assert final["status"] == "approved" and final["from"] == "drafts/itinerary_v2"
    assert final["markdown"] == v2["markdown"] and output["answer"].startswith(v2["markdown"])

    # And the learnings name what the traveler liked (kept, chosen) and changed
    learned = output["learnings"]
    assert any(line.startswith("flights:") for line in learned["liked"])
    assert any(line.startswith("chose ") for line in learned["liked"])
    assert not any(line.startswith("activities:") for line in learned["liked"])
    assert learned["changed"] == [
        'round 1: "too many museums, add a day trip" -> fewer museums, add a day trip (re-ran activities)'
    ]
    assert learned["preferences"] == {"likes": ["day_trip"], "less_of": ["museum"]}

    # And the mission record holds the result; the model was called at most 20 times
    record = cloud.runtime.missions.get(journey.mission_id)
    assert record.status == "completed" and record.result["output"]["learnings"]["approved"] is True
    assert envelope.counters.llm_calls <= MAX_LLM_CALLS
    assert envelope.counters.llm_calls == 8  # plan, 3 reflections, draft; replan, reflection, draft


# =========================================================================== the review loop's bound


def test_the_review_loop_stops_at_its_edge_limit_with_the_latest_draft_as_final(cloud: LocalCloud) -> None:
    # Given a traveler who never approves, asking for a different change each round
    requests = ["too many museums, add a day trip", "cheaper hotel", "vegetarian restaurants please", "more outdoors"]

    # When the mission runs
    run = drive(cloud, [{"pick": 1}, *[revise(text) for text in requests]])

    # Then three rounds were applied, and the fourth request ended the mission on the edge limit
    envelope = run.envelope
    assert envelope.terminal_reason == "edge_limit:review->replan"
    assert envelope.edge_counts["review->replan"] == 3
    assert [r.data["artifact"]["name"] for r in run.asked[1:]] == [f"drafts/itinerary_v{n}" for n in range(1, 5)]

    # And each round re-ran only its own coordinator: the restaurants as a second dining sub-mission, vegetarian
    redone = [e.output("replan")["redo"] for e in checkpoints(cloud, run.mission_id, "replan")]
    assert redone == [["activities"], ["hotels"], ["restaurants"]]
    first, second = (cloud.runtime.missions.get(c) for c in cloud.runtime.missions.get(run.mission_id).children)
    assert "vegetarian" not in first.goal and "vegetarian" in second.goal
    vegetarian = artifact(cloud, run.mission_id, "research/restaurants", 2)["options"]
    assert vegetarian and all(o["vegetarian"] for o in vegetarian)
    v2, v3 = (artifact(cloud, run.mission_id, "drafts/itinerary", n) for n in (2, 3))
    assert v3["cost"]["hotel"] < v2["cost"]["hotel"]

    # And the latest draft is final, saying it was not approved and why
    final = artifact(cloud, run.mission_id, "final")
    assert final["from"] == "drafts/itinerary_v4" and final["status"] == "not approved: edge_limit:review->replan"
    output = envelope.output("complete")
    assert output["approved"] is False and "review limit was reached" in output["answer"]
    assert '"more outdoors"' in output["answer"]  # the request that was not applied
    assert cloud.runtime.missions.get(run.mission_id).terminal_reason == "edge_limit:review->replan"

    # And even the longest mission stays within 20 LLM calls
    assert envelope.counters.llm_calls <= MAX_LLM_CALLS
    assert envelope.counters.llm_calls == 13


# =========================================================================== notes while it runs


def test_a_note_sent_while_it_researches_shapes_the_first_draft_within_its_bounds(
    cloud: LocalCloud, journey: Journey
) -> None:
    # Given a traveler who, while asked to pick a flight, sends "skip the museums"
    run = drive(cloud, [{"note": "skip the museums"}, {"pick": 0}, APPROVE])
    # Then before any more research the note was replanned: activities (not yet searched) get fewer museums
    (replanned,) = checkpoints(cloud, run.mission_id, "replan")
    assert replanned.output("replan")["redo"] == ["activities"]
    assert replanned.output("replan")["notes"] == ["skip the museums"]
    # And the first draft the traveler reviewed already has (almost) no museums, where the same trip without
    # the note had three or more
    first = artifact(cloud, run.mission_id, "drafts/itinerary", 1)
    assert run.asked[1].data["artifact"]["name"] == "drafts/itinerary_v1"
    research = artifact(cloud, run.mission_id, "research/activities")
    assert categories(first, research).count("museum") <= 1
    without = artifact(cloud, journey.mission_id, "drafts/itinerary", 1)
    assert categories(without, artifact(cloud, journey.mission_id, "research/activities", 1)).count("museum") >= 3
    # And the timeline shows the note received then delivered, and the mission stayed within its bounds
    types = [e.type for e in events(cloud, run.mission_id)]
    assert types.index(EventType.NOTE_RECEIVED) < types.index(EventType.NOTE_DELIVERED)
    assert run.envelope.terminal_reason == "completed"
    assert run.envelope.counters.llm_calls <= run.envelope.bounds.max_llm_calls
    assert run.envelope.output("complete")["learnings"]["changed"][0].startswith('round 1: "skip the museums"')


def test_notes_sent_while_a_draft_waits_join_the_travelers_review(cloud: LocalCloud) -> None:
    # Given a first draft under review, and a note "vegetarian restaurants please" sent while it waits
    # When the traveler then asks for a cheaper hotel
    run = drive(cloud, [{"pick": 0}, {"note": "vegetarian restaurants please"}, revise("cheaper hotel"), APPROVE])
    # Then one revision round applied both: the hotel and the restaurants ran again
    (replanned,) = checkpoints(cloud, run.mission_id, "replan")
    assert sorted(replanned.output("replan")["redo"]) == ["hotels", "restaurants"]
    assert run.asked[2].data["artifact"]["name"] == "drafts/itinerary_v2"
    v1, v2 = (artifact(cloud, run.mission_id, "drafts/itinerary", n) for n in (1, 2))
    assert v2["cost"]["hotel"] < v1["cost"]["hotel"]


def test_a_note_the_traveler_approved_past_is_reported_not_lost(cloud: LocalCloud) -> None:
    # Given a note sent while the first draft waits for review, and the traveler approves that draft as shown
    run = drive(cloud, [{"pick": 0}, {"note": "more outdoors"}, APPROVE])
    # Then the approved draft is final, and the answer says the note was not applied
    output = run.envelope.output("complete")
    assert output["approved"] is True and output["final"] == "final_v1"
    assert "more outdoors" in output["answer"] and "Not applied" in output["answer"]


# =========================================================================== a source outage


def test_a_failing_source_is_retried_then_reported_and_low_confidence_asks_the_traveler(cloud: LocalCloud) -> None:
    # Given flight sources that fail: skyscanner twice (then answers), kayak and the airline for good
    outage = {"simulate_failures": {"skyscanner": 2, "kayak": 9, "airline_direct": 9}}

    # When the traveler continues with what was found, then approves the first draft
    run = drive(cloud, [{"decision": "continue"}, APPROVE], context=outage)

    # Then each source was tried three times; skyscanner's third attempt answered
    sources = {r["source"]: r for r in artifact(cloud, run.mission_id, "research/flights")["sources"]}
    skyscanner = sources["flights:skyscanner"]
    assert (skyscanner["ok"], skyscanner["attempts"], skyscanner["count"], skyscanner["error"]) == (True, 3, 4, None)
    for failed in ("flights:kayak", "flights:airline_direct"):
        assert sources[failed]["ok"] is False and sources[failed]["attempts"] == 3
        assert "simulated outage" in sources[failed]["error"]

    # And the failures were reported as tool errors, live
    errors = [
        e.payload["error"]
        for e in events(cloud, run.mission_id)
        if e.type is EventType.TOOL_COMPLETED and e.payload["status"] == "error"
    ]
    assert sorted(error.split(":")[1] for error in errors) == ["airline_direct", "kayak"]

    # And one source in three made the flights low-confidence: the traveler was asked first
    question = run.asked[0]
    assert question.kind is InterruptKind.CHOICE and question.data["reason"] == "low_confidence"
    assert question.options == ["continue", "search again"] and "kayak" in question.question

    # And the mission completed, its answer saying which sources failed
    assert run.envelope.terminal_reason == "completed"
    output = run.envelope.output("complete")
    assert output["failed_sources"] == ["flights:airline_direct", "flights:kayak"]
    assert "Sources that failed" in output["answer"]
    assert run.envelope.counters.llm_calls <= MAX_LLM_CALLS


# =========================================================================== helpers over checkpoints


def checkpoints(cloud: LocalCloud, mission_id: str, stage: str) -> list[Envelope]:
    """The envelope after each run of `stage`, oldest first (its history, as the checkpoints kept it)."""
    found = [state for c, state in states(cloud.runtime.checkpoints, mission_id) if c.stage == stage]
    return [cloud.runtime.codec.decode(state) for state in found]


def line(markdown: str, prefix: str) -> str:
    return next(text for text in markdown.splitlines() if text.startswith(prefix))


# =========================================================================== dinners that cannot be delegated


def test_a_refused_dining_sub_mission_leaves_a_trip_without_dinners_that_says_why() -> None:
    # Given a deployment that allows no sub-missions at all
    with LocalCloud(["travel"], settings={"max_delegation_depth": 0}, prefix="missions-refusing") as refusing:
        # When a trip is planned and approved
        run = drive(refusing, [{"pick": 0}, APPROVE])
        # Then the trip still completes, with no dinner, and says why in the draft and the record
        assert run.envelope.terminal_reason == "completed"
        assert not refusing.runtime.missions.get(run.mission_id).children
        dined = refusing.outputs(run.mission_id)["dinners"]
        assert dined["options"] == 0 and dined["failed"].startswith("refused: too deep")
        final = artifact(refusing, run.mission_id, "final")
        assert "Dinner: " not in final["markdown"] and final["cost"]["dinners"] == 0
        assert "dining" in final["markdown"]  # among the sources that failed
        assert run.envelope.output("complete")["failed_sources"] == ["dining"]
