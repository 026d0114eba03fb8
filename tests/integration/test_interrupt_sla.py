"""The SLA function: questions left unanswered too long become a metric the alarm watches."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from functions.sla.handler import lambda_handler
from missions.core.mission.envelope import InterruptKind
from missions.local.emulation import LocalCloud
from missions.local.moto import LocalContext
from missions.ports.interrupts import InterruptRecord


def _question(mission_id: str, hours_ago: float, kind: InterruptKind = InterruptKind.CONFIRMATION) -> InterruptRecord:
    asked = (datetime.now(UTC) - timedelta(hours=hours_ago)).isoformat(timespec="milliseconds")
    return InterruptRecord(
        mission_id=mission_id,
        interrupt_id="int_1",
        kind=kind,
        stage="review",
        question="ship it?",
        task_token="t",
        created_at=asked,
    )


def test_overdue_questions_are_counted_and_published_as_a_metric(capsys, monkeypatch):
    with LocalCloud(["code_analysis"], settings={"interrupt_sla_hours": 24}) as cloud:
        # Given one question waiting 30 h, one waiting 2 h, one answered after 40 h, and a mission waiting
        # 50 h for its sub-mission (no user is late there)
        interrupts = cloud.runtime.interrupts
        interrupts.put(_question("m-late", 30))
        interrupts.put(_question("m-delegating", 50, InterruptKind.DELEGATION))
        interrupts.put(_question("m-fresh", 2))
        interrupts.put(_question("m-answered", 40))
        interrupts.expire("m-answered", "int_1")
        capsys.readouterr()
        monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")  # the emulation keeps metrics off stdout
        # When the SLA function runs
        result = lambda_handler({}, LocalContext("missions-sla"), runtime=cloud.runtime)
    # Then only the late one is overdue, and the count went out as an EMF metric
    assert result == {"overdue": 1, "oldest": ["m-late/int_1"]}
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    metric = next(doc for doc in emf if "InterruptsOverdue" in doc)
    assert metric["InterruptsOverdue"] == [1.0] or metric["InterruptsOverdue"] == 1.0
    assert metric["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Missions"
