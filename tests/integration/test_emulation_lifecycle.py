"""An emulation starts clean whatever ran before it in the process: a start that failed part-way is undone,
and a second emulation under the same names is refused with the reason instead of failing on a table name
(and leaving moto's state behind for every later emulation, as it once did to a whole test worker)."""

from __future__ import annotations

import pytest

from missions.local.emulation import LocalCloud


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
