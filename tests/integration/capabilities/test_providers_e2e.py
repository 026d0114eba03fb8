"""A shopping mission end to end on the emulation with the environment's provider set to Bedrock, then to
Anthropic (`llm_provider`, as a deployment sets it), each SDK answering with recorded bodies: the offline
model's answers, recorded from the same mission run offline, in each API's wire format. Every model call is
listed per mission (GET /missions/{id}/usage), and the answers stream onto the mission's events."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from missions.core.mission.events import EventType
from missions.local.emulation import LocalCloud
from tests.support.api import call
from tests.support.models.recorded_llm import (
    AnthropicTransport,
    RecordedAnswers,
    anthropic_sse,
    bedrock_client,
    bedrock_stream_body,
    serve_bedrock,
)

GOAL = "Find the best price for Sony WH-1000XM5 headphones"
USER = "ada"


def shop(cloud: LocalCloud) -> str:
    """A shopping mission: it looks up the offers, asks for a choice, and completes with Amazon's."""
    mission_id = cloud.start("shopping", GOAL, user_id=USER)
    status = cloud.wait(mission_id, timeout=60, until_interrupt=True)
    assert status == "INTERRUPTED", cloud.outcome(mission_id).envelope.errors  # type: ignore[union-attr]
    [question] = cloud.runtime.interrupts.pending(mission_id)
    cloud.answer(mission_id, question.interrupt_id, {"decision": "amazon"})
    assert cloud.wait(mission_id, timeout=60) == "SUCCEEDED", cloud.outcome(mission_id)
    return mission_id


@pytest.fixture(scope="module")
def offline() -> tuple[RecordedAnswers, dict[str, Any]]:
    """The mission's right answers, per stage, and its result, from the offline model."""
    answers = RecordedAnswers()
    with LocalCloud(["shopping"], llm=answers.recorder()) as cloud:
        mission_id = shop(cloud)
        result = cloud.runtime.missions.get(mission_id).result
    assert result is not None and answers.left() == 2
    return answers, result


def chosen(cloud: LocalCloud, mission_id: str) -> Any:
    result = cloud.runtime.missions.get(mission_id).result
    assert result is not None
    return result["output"]["chosen"]


def usage_and_stream(cloud: LocalCloud, mission_id: str) -> tuple[dict[str, Any], str]:
    status, usage = call(cloud.runtime, "GET", f"/missions/{mission_id}/usage", user=USER)
    assert status == 200, usage
    events, _ = cloud.events(mission_id)
    streamed = "".join(e.payload["text"] for e in events if e.type is EventType.LLM_OUTPUT)
    return usage, streamed


def test_a_mission_on_bedrock_runs_end_to_end_and_lists_the_usage_of_every_call(offline):
    recorded, expected = offline
    answers = recorded.replay()
    # Given Bedrock as the environment's provider, its ConverseStream answering with the recorded answers
    client = bedrock_client()
    seen = serve_bedrock(
        client,
        lambda body: (
            200,
            {"content-type": "application/vnd.amazon.eventstream"},
            bedrock_stream_body(answers.next_for(body["toolConfig"]["tools"][0]["toolSpec"]["description"]), 300, 60),
        ),
    )
    settings = {"llm_provider": "bedrock", "bedrock_default_model": "amazon.nova-lite-v1:0"}
    with LocalCloud(["shopping"], settings=settings, clients={"bedrock-runtime": client}) as cloud:
        # When the mission runs
        mission_id = shop(cloud)
        # Then it ended as it ends offline, every call went to Bedrock's model with one forced tool
        assert chosen(cloud, mission_id) == expected["output"]["chosen"]
        assert [body["toolConfig"]["toolChoice"]["tool"]["name"] for body in seen] == ["ProductQuery", "Summary"]
        # and each call is listed with its provider, model, tokens and cost
        usage, streamed = usage_and_stream(cloud, mission_id)
    calls = usage["calls"]
    assert [(c["stage"], c["provider"], c["model"], c["outcome"]) for c in calls] == [
        ("execute", "bedrock", "amazon.nova-lite-v1:0", "ok"),
        ("complete", "bedrock", "amazon.nova-lite-v1:0", "ok"),
    ]
    assert all((c["tokens_in"], c["tokens_out"]) == (300, 60) and c["cost_usd"] > 0 for c in calls)
    assert usage["total"]["calls"] == 2 and usage["total"]["cost_usd"] == pytest.approx(2 * calls[0]["cost_usd"])
    # and the answers were streamed onto the mission's events as they were written
    assert '"product": "Sony WH-1000XM5 headphones"' in streamed and '"summary": "You chose Amazon' in streamed


def test_a_mission_on_anthropic_runs_end_to_end_and_lists_the_usage_of_every_call(offline):
    recorded, expected = offline
    answers = recorded.replay()
    # Given Anthropic as the environment's provider, its Messages API streaming the recorded answers (SSE)
    transport = AnthropicTransport(
        lambda body: httpx2.Response(
            200,
            content=anthropic_sse(answers.next_for(body["tools"][0]["description"]), body["model"], 250, 50),
            headers={"content-type": "text/event-stream"},
        )
    )
    settings = {"llm_provider": "anthropic", "anthropic_api_key": "sk-ant-recorded-0123456789abcdef"}
    http = httpx2.Client(transport=transport)
    with LocalCloud(["shopping"], settings=settings, clients={"anthropic-http": http}) as cloud:
        # When the mission runs
        mission_id = shop(cloud)
        # Then it ended as it ends offline, on the environment's default Anthropic model
        assert chosen(cloud, mission_id) == expected["output"]["chosen"]
        assert [body["model"] for body in transport.requests] == ["claude-haiku-4-5"] * 2
        usage, streamed = usage_and_stream(cloud, mission_id)
    # and each call is listed with its provider, model, tokens and cost
    assert [(c["stage"], c["provider"], c["model"]) for c in usage["calls"]] == [
        ("execute", "anthropic", "claude-haiku-4-5"),
        ("complete", "anthropic", "claude-haiku-4-5"),
    ]
    assert all((c["tokens_in"], c["tokens_out"]) == (250, 50) and c["cost_usd"] > 0 for c in usage["calls"])
    assert '"product": "Sony WH-1000XM5 headphones"' in streamed and '"summary": "You chose Amazon' in streamed
