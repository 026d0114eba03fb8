"""Agents as data: what resolving a stage's configuration adds to a stage, as a ratio of the runner's own cost.

A stage reads the configuration version its mission pinned (missions.service.agents.AgentConfigs.pinned),
applies it to its agent and renders its prompt (the runner's PinnedAgents.configured). Versions never
change, so a warm function reads one from DynamoDB once and then from memory; a starting mission reads its
capability's active versions (`pins`), cached for agents_cache_seconds. Figures, measured in one run, each a median:

- `stage_overhead_ms`: the runner's overhead per stage (StageTimings.overhead_ms: a stage's wall time less
  its model and tool time) over the first stage of the first capability that starts with a model (by name),
  on the offline model and in-memory stores, with pins:
  the baseline every ratio divides by.
- `resolve_cached_ms`: resolving one stage's configuration with the version in the process's cache.
- `resolve_uncached_ms`: the same with the cache dropped before each: one GetItem on the agents table (moto).
- `pins_cached_ms` / `pins_uncached_ms`: a mission's start reading its capability's active versions, cached,
  and with the cache expired (one Query on the agents table, moto).
Each `*_ratio` is the figure over `stage_overhead_ms`. moto's own cost per call dominates the uncached
figures (a real DynamoDB GetItem is a network round trip of a few ms): they are reported, not held to a target.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench import ratio_rows
from missions.adapters.llm.scripted import ScriptedProvider
from missions.adapters.memory.agents import InMemoryAgentStore
from missions.adapters.memory.blobs import MemoryBlobStore
from missions.adapters.memory.checkpoints import MemoryCheckpointStore
from missions.adapters.memory.events import MemoryEventStore
from missions.adapters.memory.missions import MemoryMissionStore
from missions.core.capability import registry as registry
from missions.core.llm.agents import AgentSettings
from missions.core.mission.offload import EnvelopeCodec
from missions.core.mission.requests import MissionRequest
from missions.core.specs import AGENTS
from missions.core.triggers.declared import TriggerSource
from missions.ports.missions import MissionRecord
from missions.service.agents import AgentConfigs
from missions.service.launcher import build_envelope
from missions.service.runner import StageRunner, StageServices, StageTimings
from missions.service.runner._agents import PinnedAgents


def _subject() -> tuple[str, str]:
    """(capability, stage): the first capability, by name, whose first stage asks a model. Found, not named:
    only a capability's own folder names it."""
    for name in sorted(registry.available()):
        pipeline = registry.load(name).pipeline
        if pipeline.agent(pipeline.start).has_llm:
            return name, pipeline.start
    raise LookupError("no capability starts with a model stage")


CAPABILITY, STAGE = _subject()
MISSIONS = 20
RESOLUTIONS = 2000


def _configs(store: Any) -> AgentConfigs:
    configs = AgentConfigs(store, registry.default_registry(), environment_models=["gpt-4o-mini"])
    version = configs.create(CAPABILITY, STAGE, AgentSettings(prompt="Intake for {{capability}} on {{date}}."), "b")
    configs.promote(CAPABILITY, STAGE, version.version, "bench")
    return configs


def _stage_overhead(configs: AgentConfigs) -> float:
    """The runner's overhead per stage (ms, median) over whole first stages of CAPABILITY's missions."""
    capability = registry.load(CAPABILITY)
    overheads: list[float] = []

    def timed(stage: str, timings: StageTimings) -> None:
        overheads.append(timings.overhead_ms)

    missions = MemoryMissionStore()
    services = StageServices(
        checkpoints=MemoryCheckpointStore(),
        events=MemoryEventStore(),
        codec=EnvelopeCodec(MemoryBlobStore()),
        llm=lambda cap: ScriptedProvider(cap.offline_policy),
        missions=missions,
        agents=configs.pinned,
        on_timings=timed,
    )
    runner = StageRunner(capability, services)
    for _ in range(MISSIONS):
        goal = registry.load(CAPABILITY).example_goal or "help"
        request = MissionRequest(capability=CAPABILITY, goal=goal, trigger=TriggerSource.CLI)
        envelope = build_envelope(request, agents=configs)
        missions.create(
            MissionRecord(
                mission_id=envelope.mission_id, user_id="u", capability=CAPABILITY, goal="g", status="running"
            )
        )
        state = services.codec.encode(envelope)
        runner.handle({"stage": STAGE, "mode": "run", "envelope": state, "hop": 0})
    return statistics.median(overheads)


def _median_ms(
    action: Callable[[], object], before: Callable[[], object] | None = None, runs: int = RESOLUTIONS
) -> float:
    samples = []
    for _ in range(runs):
        if before is not None:
            before()
        started = time.perf_counter()
        action()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def run() -> dict[str, Any]:
    from moto import mock_aws

    from missions.adapters.dynamodb.agents import DynamoAgentStore
    from missions.adapters.dynamodb.tables import table_definition

    overhead = _stage_overhead(_configs(InMemoryAgentStore()))
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")}
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
    try:
        with mock_aws():
            import boto3

            client = boto3.client("dynamodb", region_name="us-east-1")
            client.create_table(**table_definition(AGENTS, "bench-agents"))
            configs = _configs(DynamoAgentStore("bench-agents", client=client))
            capability = registry.load(CAPABILITY)
            envelope = build_envelope(MissionRequest(capability=CAPABILITY, goal="g"), agents=configs)
            pinned = PinnedAgents(
                capability,
                StageServices(
                    checkpoints=MemoryCheckpointStore(),
                    events=MemoryEventStore(),
                    codec=EnvelopeCodec(MemoryBlobStore()),
                    llm=lambda cap: ScriptedProvider(cap.offline_policy),
                    agents=configs.pinned,
                ),
            )
            resolve: Callable[[], object] = lambda: pinned.configured(envelope, STAGE)  # noqa: E731  what each stage does
            resolve()
            cached = _median_ms(resolve)
            uncached = _median_ms(resolve, before=configs._pinned.clear, runs=RESOLUTIONS // 10)
            pins: Callable[[], object] = lambda: configs.pins(CAPABILITY)  # noqa: E731
            pins()
            pins_cached = _median_ms(pins)
            pins_uncached = _median_ms(pins, before=lambda: configs.forget(CAPABILITY), runs=RESOLUTIONS // 10)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    figures = {
        "stage_overhead_ms": round(overhead, 4),
        "resolve_cached_ms": round(cached, 4),
        "resolve_uncached_ms": round(uncached, 4),
        "pins_cached_ms": round(pins_cached, 4),
        "pins_uncached_ms": round(pins_uncached, 4),
    }
    for name in ("resolve_cached", "resolve_uncached", "pins_cached", "pins_uncached"):
        figures[f"{name}_ratio"] = round(figures[f"{name}_ms"] / overhead, 4)
    return figures


def rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    labels = {
        "resolve_cached": "agent config per stage, cached",
        "resolve_uncached": "agent config per stage, uncached (moto GetItem)",
        "pins_cached": "active versions at a start, cached",
        "pins_uncached": "active versions at a start, uncached (moto Query)",
    }
    return ratio_rows(results, f"x a stage's overhead ({results['stage_overhead_ms']:.3f} ms)", labels)


def checks(results: dict[str, Any]) -> dict[str, bool]:
    # a cached resolution must stay a small part of what a stage costs the runtime
    return {"cached agent config <= 10% of a stage's overhead": results["resolve_cached_ratio"] <= 0.10}
