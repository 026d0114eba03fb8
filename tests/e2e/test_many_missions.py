"""More missions than any listing's page (Step Functions lists 100 executions a page): on the full
emulation every ended execution is heard, so every queued mission starts and none is stranded."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from missions.local.emulation import LocalCloud

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
MISSIONS = 110  # over a page of 100 executions, for one user who may run 3 at once


def test_every_queued_mission_of_a_busy_user_starts_and_ends():
    with LocalCloud(["code_analysis"], settings={"repo_roots": [str(ROOT)]}) as cloud:
        # Given one user submitting 110 missions at once (3 run, the rest queue)
        mission_ids = [
            cloud.start(
                "code_analysis", f"Where is compute_tax defined? ({n})", context={"repo": str(ROOT)}, user_id="busy"
            )
            for n in range(MISSIONS)
        ]
        # When every one of them is waited for
        deadline = time.monotonic() + 600
        statuses = {
            mission_id: cloud.wait(mission_id, timeout=max(1.0, deadline - time.monotonic()))
            for mission_id in mission_ids
        }
        # Then each ran and ended, and the user holds no slot and no queue entry afterwards
        assert set(statuses.values()) == {"SUCCEEDED"}, {s for s in statuses.values()}
        dispatcher = cloud.runtime.launcher.dispatcher
        assert dispatcher.running("busy") == set() and dispatcher.queued("busy") == []
        ended = {cloud.runtime.missions.get(mission_id).status for mission_id in mission_ids}
        assert ended == {"completed"}, ended
