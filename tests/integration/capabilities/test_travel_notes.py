"""A travel draft written while the traveler sent a note is revised before they are asked to review it.

Its own module: it runs an emulation of its own (a model that holds the first draft), and an emulation
runs alone in a process (see tests/integration/capabilities/test_travel.py for the module-wide one)."""

from __future__ import annotations

import threading

from missions.adapters.llm.scripted import ScriptedProvider
from missions.core.capability import registry as registry
from missions.core.llm.provider import LLMRequest, LLMResult
from missions.local.emulation import LocalCloud
from tests.integration.capabilities.test_travel import APPROVE, GOAL, WAIT, artifact, categories, checkpoints


class DraftingGate:
    """The offline model, holding the first draft's call until the test lets it go."""

    name = "gated"

    def __init__(self) -> None:
        self._scripted = ScriptedProvider(registry.load("travel").offline_policy)
        self.drafting, self.release = threading.Event(), threading.Event()

    def complete(self, request: LLMRequest) -> LLMResult:
        if request.stage == "synthesis" and not self.drafting.is_set():
            self.drafting.set()
            assert self.release.wait(WAIT)
        return self._scripted.complete(request)


def test_a_draft_written_without_a_note_is_revised_before_the_traveler_is_asked() -> None:
    gate = DraftingGate()
    with LocalCloud(["travel"], llm=gate) as local:
        # Given a mission writing its first draft when the traveler sends "skip the museums"
        mission_id = local.start("travel", GOAL)
        assert local.wait(mission_id, timeout=WAIT, until_interrupt=True) == "INTERRUPTED"
        [pick] = local.runtime.interrupts.pending(mission_id)
        local.answer(mission_id, pick.interrupt_id, {"decision": pick.options[0]})
        assert gate.drafting.wait(WAIT)
        local.runtime.control.note(local.runtime.missions.get(mission_id), "skip the museums")
        gate.release.set()
        # When the draft is done
        assert local.wait(mission_id, timeout=WAIT, until_interrupt=True) == "INTERRUPTED"
        [review] = local.runtime.interrupts.pending(mission_id)
        # Then the traveler is asked about a second draft, revised for the note, not the one written without it
        assert review.data["artifact"]["name"] == "drafts/itinerary_v2"
        (replanned,) = checkpoints(local, mission_id, "replan")
        assert replanned.output("replan")["notes"] == ["skip the museums"]
        v1, v2 = (artifact(local, mission_id, "drafts/itinerary", n) for n in (1, 2))
        research = artifact(local, mission_id, "research/activities")
        assert categories(v2, research).count("museum") < categories(v1, research).count("museum")
        local.answer(mission_id, review.interrupt_id, APPROVE)
        assert local.wait(mission_id, timeout=WAIT) == "SUCCEEDED"
