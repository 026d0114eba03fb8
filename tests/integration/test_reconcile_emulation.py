"""The reconciler on the emulation (DynamoDB and Step Functions in moto): a start whose function died after
it took the mission's slot, or after the execution began but before its note was forgotten, is finished once."""

from __future__ import annotations

import time
from typing import Any

import pytest

from functions.reconcile.handler import lambda_handler
from missions.local.emulation import LocalCloud
from missions.local.moto import LocalContext

LATER = 10**12  # nanoseconds: 1,000 s on, past the reconciler's stale-after of 960 s


class Died(BaseException):
    """The function's process died: not an Exception, so nothing in the runtime catches it."""


def dying_after(method: Any) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        method(*args, **kwargs)
        raise Died(method.__name__)

    return call


def dead(*args: Any) -> None:
    raise Died("dead already")


@pytest.mark.parametrize("dies_after", ["take_slot", "start"])
def test_a_start_cut_short_by_a_crash_is_finished_by_the_reconciler(dies_after, monkeypatch):
    with LocalCloud(["shopping"]) as cloud:
        runtime = cloud.runtime
        # Given a submit whose function dies right after taking the mission's slot, or right after its
        # execution began (its note never forgotten)
        port = runtime.dispatch_store if dies_after == "take_slot" else runtime.executions
        monkeypatch.setattr(port, dies_after, dying_after(getattr(port, dies_after)))
        monkeypatch.setattr(runtime.dispatch_store, "forget", dead)  # a dead process forgets nothing
        with pytest.raises(Died):
            cloud.start("shopping", "a kettle under 40 euros", user_id="ann", mission_id="m_cut_short")
        monkeypatch.undo()
        assert runtime.dispatch_store.running("ann") == {"m_cut_short"}
        # When the reconcile function runs too early, it leaves the start to the function doing it
        early = lambda_handler({}, LocalContext("missions-reconcile"), runtime=runtime)
        assert early["started"] == [] and early["dropped"] == []
        # and when it runs once the start is stale
        report = runtime.launcher.reconcile(now=lambda: time.time_ns() + LATER)
        # Then the mission runs in one execution, to its end (or its question), and the journal is empty (a
        # mission that holds its slot but never started is queued and started by the drain that follows; an
        # execution that began already is started again, which keeps the one that exists, or, when it already
        # went on or ended, only its note is forgotten)
        assert report["failures"] == {}
        if dies_after == "take_slot":
            assert report["queued"] == ["m_cut_short"]
        else:
            assert report["started"] + report["dropped"] + report["released"] == ["m_cut_short"]
        deadline = time.monotonic() + 60
        while runtime.missions.get("m_cut_short").status not in ("completed", "interrupted"):
            record = runtime.missions.get("m_cut_short")
            assert time.monotonic() < deadline, (record.status, record.terminal_reason)
            time.sleep(0.05)
        executions = cloud.sfn.list_executions(stateMachineArn=runtime.settings.state_machine_arns["shopping"])
        assert [e["name"] for e in executions["executions"]] == ["m_cut_short"]
        assert runtime.dispatch_store.stranded(time.time_ns() + LATER) == []
