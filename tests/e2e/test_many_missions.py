"""More missions than any listing's page (Step Functions lists 100 executions a page): on the full
emulation every ended execution is heard, so every queued mission starts and none is stranded.

The missions are of a one-stage capability: what is under test is the dispatcher hearing every
execution's end across pages, not what a mission does (the capabilities' own tests cover that)."""

from __future__ import annotations

import time

import pytest

from missions.core.mission.status import TERMINAL
from missions.local.emulation import LocalCloud
from tests.integration.conftest import chain, final_answer, make_capability, with_capabilities

pytestmark = pytest.mark.e2e
MISSIONS = 110  # over a page of 100 executions, for one user who may run 3 at once


def test_every_queued_mission_of_a_busy_user_starts_and_ends():
    brief = make_capability("brief", chain("final"), final_answer("noted"))
    names, registry = with_capabilities(brief)
    with LocalCloud(names, registry=registry) as cloud:
        # Given one user submitting 110 missions at once (3 run, the rest queue)
        mission_ids = [cloud.start("brief", f"Note this ({n})", user_id="busy") for n in range(MISSIONS)]
        assert len(mission_ids) == MISSIONS
        # When every one of them is waited for (by its record: the emulation keeps only the last ended
        # executions, as a long-running dev server must, and these missions end faster than one can look)
        deadline = time.monotonic() + 600
        ended: dict[str, str] = {}
        while len(ended) < MISSIONS and time.monotonic() < deadline:
            for mission_id in mission_ids:
                if mission_id not in ended:
                    status = cloud.runtime.missions.get(mission_id).status
                    if status in TERMINAL:
                        ended[mission_id] = status
            time.sleep(0.2)
        dispatcher = cloud.runtime.launcher.dispatcher
        while dispatcher.running("busy") and time.monotonic() < deadline:  # the last ends being heard
            time.sleep(0.05)
        # Then each ran and ended, and the user holds no slot and no queue entry afterwards
        assert len(ended) == MISSIONS, f"{MISSIONS - len(ended)} missions never ended"
        assert set(ended.values()) == {"completed"}, set(ended.values())
        assert dispatcher.running("busy") == set() and dispatcher.queued("busy") == []
