"""An emulation starts clean whatever ran before it in the process: a start that failed part-way is undone,
and a second emulation under the same names is refused with the reason instead of failing on a table name
(and leaving moto's state behind for every later emulation, as it once did to a whole test worker)."""

from __future__ import annotations

import time

import pytest

from missions.local import moto as moto_patches
from missions.local.emulation import LocalCloud
from tests.integration.conftest import chain, final_answer, make_capability, with_capabilities


def test_a_failed_start_is_undone_and_the_next_emulation_starts_clean():
    # Given an emulation whose start fails part-way (a capability nobody installed)
    with pytest.raises(Exception, match="no_such_capability"), LocalCloud(["no_such_capability"]):
        pass
    # When the next one starts / Then it provisions its tables afresh and runs a mission
    with LocalCloud(["shopping"]) as cloud:
        mission_id = cloud.start("shopping", "a desk lamp under 40 dollars")
        assert cloud.wait(mission_id, timeout=60, until_interrupt=True) in ("INTERRUPTED", "SUCCEEDED")


def test_a_second_emulation_under_the_same_names_is_refused_and_the_first_goes_on():
    with LocalCloud(["shopping"]) as first:
        # When another starts with the same prefix / Then it is refused, saying what to do
        refused = "already runs in this process: give this one another prefix"
        with pytest.raises(RuntimeError, match=refused), LocalCloud(["shopping"]):
            pass
        # And the first one still works
        mission_id = first.start("shopping", "a desk lamp under 40 dollars")
        assert first.wait(mission_id, timeout=60, until_interrupt=True) in ("INTERRUPTED", "SUCCEEDED")


QUICK = make_capability("t_quick", chain("final"), final_answer())


def test_closing_lets_the_end_of_a_mission_reach_the_status_function_first():
    # Given a status function slower than the close that follows a mission's end (a loaded machine)
    names, known = with_capabilities(QUICK)
    delivered: list[str] = []
    with LocalCloud(names, registry=known) as cloud:
        status = f"{cloud.prefix}-status"
        real = moto_patches.functions.handler(status)
        assert real is not None

        def slow(event, context):
            time.sleep(1.0)
            result = real(event, context)  # it frees the user's slot: tables gone would fail it
            delivered.append(event["detail"]["executionArn"])
            return result

        moto_patches.register(status, slow)
        mission_id = cloud.start(QUICK.name, "anything")
        deadline = time.monotonic() + 60
        while cloud.status(mission_id) == "RUNNING" and time.monotonic() < deadline:  # as `missions run` follows it
            time.sleep(0.05)
        assert cloud.status(mission_id) == "SUCCEEDED"
        # When the emulation closes as soon as the execution says it ended
    # Then the end was delivered before moto stopped
    assert [arn.rsplit(":", 1)[1] for arn in delivered] == [mission_id]
