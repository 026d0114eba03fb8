"""Test capabilities whose parallel branches (or fan-out items) each ask their user: a trip whose flights and
hotel branches ask side by side while its car branch just finishes, and a fan-out whose odd items ask to be
kept. The emulation, API, CLI and browser tests all run these.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel

from missions.core.capability.registry import Capability, Ctx, stage
from missions.core.mission.envelope import InterruptKind
from missions.core.pipeline.config import AgentConfig, FanOut
from tests.integration.conftest import chain, make_capability
from tests.support.stages import Note, Out

RAN = Counter[str]()  # how often each branch's function ran to its end (a finished branch must not run again)


class Pick(BaseModel):
    what: str
    choice: str
    draft: str


class Trip(BaseModel):
    answer: str


@stage
def intake(ctx: Ctx) -> Out:
    return Out(trip=ctx.goal)


@stage
def flights(ctx: Ctx) -> Pick:
    draft = ctx.think(Note, about="flights")  # asked once: replayed when the branch resumes with its answer
    seat = ctx.ask(InterruptKind.CHOICE, "Window or aisle?", options=["window", "aisle"])
    RAN["flights"] += 1
    return Pick(what="seat", choice=seat.decision or "", draft=draft.text)


@stage
def hotel(ctx: Ctx) -> Pick:
    draft = ctx.think(Note, about="hotel")
    area = ctx.ask(InterruptKind.CLARIFICATION, "Which neighbourhood?")
    RAN["hotel"] += 1
    return Pick(what="area", choice=area.text or "", draft=draft.text)


@stage
def car(ctx: Ctx) -> Pick:
    draft = ctx.think(Note, about="car")
    RAN["car"] += 1
    return Pick(what="car", choice="compact", draft=draft.text)


@stage
def book(ctx: Ctx, flights: Pick | None, hotel: Pick | None, car: Pick | None) -> Trip:
    """Also the failure path's final stage: then the branches that asked have no output."""
    if flights is None or hotel is None or car is None:
        return Trip(answer="nothing booked")
    asked = [a["stage"] for a in ctx.answers]
    return Trip(answer=f"{flights.choice} seat, {hotel.choice}, {car.choice} car (asked: {', '.join(asked)})")


def _trip(name: str, **pipeline: Any) -> Capability:
    """intake -> (flights | hotel | car) -> book; a choice resumes at intake, which a branch's question must not."""
    return make_capability(
        name,
        [
            AgentConfig(name="intake", default_next="options"),
            AgentConfig(name="flights", has_llm=True, default_next="book"),
            AgentConfig(name="hotel", has_llm=True, default_next="book"),
            AgentConfig(name="car", has_llm=True, default_next="book"),
            AgentConfig(name="book"),
        ],
        intake,
        flights,
        hotel,
        car,
        book,
        parallel=[{"name": "options", "stages": ["flights", "hotel", "car"]}],
        resume={"choice": "intake"},
        **pipeline,
    )


TRIP = _trip("t_trip_asks")
TRIP_UNANSWERED = _trip("t_trip_unanswered", interrupt_timeout_seconds=2)  # its questions wait 2 s at most


class Kept(BaseModel):
    value: int
    kept: bool


@stage
def items(ctx: Ctx) -> Out:
    ctx.fan_out([1, 2, 3])
    return Out(planned=3)


@stage
def check(ctx: Ctx, item: int) -> Kept:
    """Odd items ask whether to keep them; even ones are kept without asking."""
    if item % 2 == 0:
        return Kept(value=item, kept=True)
    keep = ctx.ask(InterruptKind.CHOICE, f"Keep item {item}?", options=["yes", "no"])
    return Kept(value=item, kept=keep.decision == "yes")


@stage
def tally(items: list[Kept]) -> Trip:
    return Trip(answer="kept " + ", ".join(str(k.value) for k in items if k.kept))


ITEMS = make_capability(
    "t_items_ask",
    chain("items", "check", "tally", check={"fan_out": FanOut(max_concurrency=3)}),
    items,
    check,
    tally,
)
