"""The capability contract, for every installed capability (a new one gets it for free).

A capability conforms when it loads and compiles, runs offline to `completed` on its example goal
answering every question it asks (whatever the kind), stays within its bounds, records what its
model calls cost, has a stage function for every stage that needs code, and gets over a model answer it
cannot use by asking again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from missions.adapters.llm.scripted import ScriptedProvider
from missions.core.capability import registry as registry
from missions.core.llm.provider import LLMRequest
from missions.core.mission.envelope import InterruptKind
from missions.core.pipeline.compiler import compile_pipeline
from tests.support.driver import DirectDriver

ROOT = Path(__file__).resolve().parents[2]
CAPABILITIES = registry.installed()


def answer(interrupt: dict[str, Any]) -> dict[str, Any]:
    """What a cooperative user says to any question: yes, the first option, or a plain reply."""
    kind = InterruptKind(interrupt["kind"])
    if kind is InterruptKind.CHOICE:
        return {"decision": interrupt["options"][0]}
    if kind is InterruptKind.CLARIFICATION:
        return {"text": "Yes, go ahead with what you think is best."}
    return {"approved": True, "decision": "accept"}


@pytest.fixture(params=CAPABILITIES)
def capability(request: pytest.FixtureRequest) -> registry.Capability:
    return registry.load(request.param)


def test_it_loads_compiles_and_declares_an_example(capability: registry.Capability) -> None:
    definition = compile_pipeline(capability.pipeline)
    assert definition["States"] and capability.example_goal and capability.description
    for agent in capability.pipeline.agents:
        if agent.has_llm:
            assert agent.name in capability.stages, agent.name  # a model is only asked by a function


def test_it_runs_offline_to_completed_answering_every_question(capability: registry.Capability) -> None:
    # Given its example goal (and this repository, for a capability that reads one)
    context = {"repo": str(ROOT)} if capability.repository != "none" else {}
    asked: list[str] = []

    def user(interrupt: dict[str, Any]) -> dict[str, Any]:
        asked.append(interrupt["kind"])
        return answer(interrupt)

    # When it runs offline, its questions answered as they come
    driver = DirectDriver(capability)
    envelope = driver.run(capability.example_goal, context=context, answer_with=user)

    # Then it completes, within its bounds, and counts what it did
    assert envelope.terminal_reason == "completed", (envelope.terminal_reason, envelope.errors, envelope.failure)
    assert not envelope.errors, envelope.errors
    bounds, counters = envelope.bounds, envelope.counters
    assert counters.agent_hops <= bounds.max_agent_hops
    assert counters.llm_calls <= bounds.max_llm_calls and counters.tool_calls <= bounds.max_tool_calls
    assert counters.cost_usd <= bounds.max_cost_usd
    llm_stages = {a.name for a in capability.pipeline.agents if a.has_llm}
    if llm_stages & {record.stage for record in driver.history(envelope)}:
        assert counters.llm_calls > 0 and counters.tokens_in > 0 and counters.tokens_out > 0
    assert len(asked) + len(driver.children) == len(envelope.answers)  # a sub-mission's end answers its wait
    # and each of its checkpoints gives back (snapshot and deltas folded) the state its stage returned
    assert driver.checkpointed(envelope) == driver.returned


def test_its_model_stages_recover_from_a_first_answer_that_is_not_valid(capability: registry.Capability) -> None:
    # Given an offline model whose first answer in each stage is prose, not the stage's output
    offline, wrong = capability.offline_policy, set[str]()

    def prose_first(request: LLMRequest) -> Any:
        if request.stage not in wrong:
            wrong.add(request.stage)
            return "Sure! Here is what I found."
        return offline(request)

    model = ScriptedProvider(prose_first)
    context = {"repo": str(ROOT)} if capability.repository != "none" else {}
    # When it runs with room in its bounds for one more model call per stage (a repair is a call)
    driver = DirectDriver(capability, llm=model)
    room = {"max_llm_calls": 2 * capability.pipeline.bounds.max_llm_calls}
    envelope = driver.run(capability.example_goal, context=context, bounds=room, answer_with=answer)
    # Then each stage was shown its answer and asked again, and the mission completed as it does offline
    assert envelope.terminal_reason == "completed", (envelope.terminal_reason, envelope.errors)
    repaired = [e for e in envelope.errors if "(repaired by asking again)" in e.message]
    assert sorted(e.stage for e in repaired) == sorted(wrong)
    assert wrong or not any(agent.has_llm for agent in capability.pipeline.agents)
    assert {e.kind for e in envelope.errors} <= {"InvalidOutput"}
