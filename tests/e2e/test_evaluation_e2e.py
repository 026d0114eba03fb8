"""Trace scorers as users and operators meet them: over HTTP, from the CLI, and the nightly run that
stores each verdict and alarms on a tool used without approval (the dev server on the emulation)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from functions.evaluate.handler import lambda_handler as nightly
from missions.core.capability import registry as registry
from missions.core.capability.offline import SchemaAnswers
from missions.core.capability.registry import Capability, Ctx, stage
from missions.core.capability.tools import RiskLevel, ToolCatalog, ToolCategory, ToolResult
from missions.core.mission.events import Event, EventType
from missions.core.pipeline.config import AgentConfig, PipelineConfig, ToolAccess
from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from missions.local.moto import LocalContext
from tests.e2e.cli.test_cli_remote import missions
from tests.e2e.test_dev_server import Client, wait_for

pytestmark = pytest.mark.e2e


class Note(BaseModel):
    text: str


class Published(BaseModel):
    status: str


class Done(BaseModel):
    answer: str


TOOLS = ToolCatalog()


@TOOLS.register("notes.publish", "publish a note", Note, category=ToolCategory.WRITE, risk=RiskLevel.WRITE)
def publish_note(note: Note) -> ToolResult:
    return ToolResult.ok({"published": note.text})


@stage
def draft(ctx: Ctx) -> Note:
    return ctx.think(Note)


@stage
def publish(ctx: Ctx, draft: Note) -> Published:
    return Published(status=ctx.tools.execute("notes.publish", {"text": draft.text}).status)


@stage
def done(publish: Published | None) -> Done:
    return Done(answer=publish.status if publish else "nothing published")


PIPELINE = PipelineConfig(
    name="t_publish",
    retry_interval_seconds=1,
    agents=[
        AgentConfig(name="draft", has_llm=True, default_next="publish"),
        AgentConfig(name="publish", has_tools=True, tool_access=ToolAccess.WRITE, default_next="done"),
        AgentConfig(name="done"),
    ],
)
PUBLISHING = Capability(
    name="t_publish",
    description="drafts a note and publishes it once the user approves",
    pipeline=PIPELINE,
    stages={f.name: f for f in (draft, publish, done)},
    offline_policy=SchemaAnswers({"draft": {"text": "A note about {goal}"}}),
    catalog=TOOLS,
    prompts={"draft": "Draft a short note."},
)


@pytest.fixture(scope="module")
def server():
    cloud = LocalCloud(["t_publish"], registry=registry.Registry().including(PUBLISHING))
    with cloud, DevServer(cloud, port=0) as dev:
        yield dev


def approved_mission(client: Client) -> str:
    status, created = client.call("POST", "/missions", {"capability": "t_publish", "goal": "penguins"})
    assert status == 202, created
    mission = wait_for(client, created["mission_id"], {"interrupted"})
    question = mission["pending_interrupt"]
    assert "notes.publish" in question["question"]
    status, _ = client.call(
        "POST", f"/missions/{mission['mission_id']}/interrupts/{question['interrupt_id']}", {"approved": True}
    )
    assert status == 200
    assert wait_for(client, mission["mission_id"], {"completed"})["status"] == "completed"
    return str(mission["mission_id"])


def evaluated(server: DevServer, mission_id: str) -> list[Event]:
    events, _ = server.cloud.runtime.events.read(mission_id, limit=500)
    return [e for e in events if e.type is EventType.MISSION_EVALUATED]


def test_a_mission_that_asked_before_writing_scores_safe_over_http_and_from_the_cli(server: DevServer):
    # Given a mission whose write tool ran after the user approved that call
    alice = Client(server, "alice")
    mission_id = approved_mission(alice)
    # When its owner reads its evaluation
    status, evaluation = alice.call("GET", f"/missions/{mission_id}/evaluation")
    # Then every scorer passed, the approved call counted as checked, and the tool calls are listed
    assert status == 200, evaluation
    scores = {s["name"]: s for s in evaluation["scores"]}
    assert all(s["passed"] for s in scores.values()), scores
    assert scores["tool_usage_safety"]["detail"].startswith("1 call(s) with side effects, 0 without")
    assert evaluation["tool_calls"] == {"notes.publish": 1}
    # and another user cannot read it
    assert Client(server, "bob").call("GET", f"/missions/{mission_id}/evaluation")[0] == 404
    # and the CLI scores the newest ones the same way
    result = missions(server, "evaluate", "--last", "5")
    assert result.returncode == 0, result.stdout + result.stderr
    assert mission_id in result.stdout and "0 safety violation(s)" in result.stdout


def test_the_nightly_run_keeps_each_verdict_once_and_alarms_on_a_write_without_approval(
    server: DevServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    # Given a clean mission, and one whose timeline shows a publish nobody approved
    carol = Client(server, "carol")
    clean = approved_mission(carol)
    tampered = approved_mission(carol)
    server.cloud.runtime.events.append(
        tampered,
        "tampered",
        [
            Event(
                type=EventType.TOOL_STARTED,
                mission_id=tampered,
                stage="publish",
                payload={"tool": "notes.publish", "risk": "write", "call_id": "never-approved"},
            )
        ],
    )
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    capsys.readouterr()
    # When the nightly evaluation runs, twice
    report = nightly({}, LocalContext("missions-evaluate"), runtime=server.cloud.runtime)
    nightly({}, LocalContext("missions-evaluate"), runtime=server.cloud.runtime)
    # Then the violation is reported, published as the metric the alarm watches, and logged
    assert report["safety_violations"] == 1
    assert report["violations"][0].startswith("publish: notes.publish (write)")
    out = capsys.readouterr().out
    emf = [json.loads(line) for line in out.splitlines() if '"_aws"' in line]
    metric: dict[str, Any] = next(doc for doc in emf if "SafetyViolations" in doc)
    assert metric["SafetyViolations"] in (1, 1.0, [1.0])
    # and each mission's timeline holds one verdict, however often the job ran
    assert len(evaluated(server, clean)) == 1 and evaluated(server, clean)[0].payload["violations"] == []
    assert len(evaluated(server, tampered)) == 1
    # and the CLI flags it for its owner, exiting non-zero
    result = missions(server, "evaluate", "--last", "5", user="carol")
    assert result.returncode == 1 and "safety: publish: notes.publish" in result.stdout
