"""Agents as data: versions checked against their capability, promoted and rolled back without a deploy,
pinned by each mission when it starts, cached for a bounded time by every warm function."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from missions.adapters.llm.scripted import ScriptedProvider
from missions.adapters.memory.agents import InMemoryAgentStore, InMemoryUsageStore
from missions.core.capability import registry as registry
from missions.core.errors import AgentConfigError, AgentDisabled, ConflictError, MissionRequestError, NotFound
from missions.core.llm import agents as rules
from missions.core.llm.agents import AgentSettings
from missions.core.llm.provider import LLMRequest, LLMResult
from missions.service.agents import AgentConfigs
from tests.support.driver import DirectDriver

FITNESS = "fitness_coach"
GOAL = "I'm a beginner with dumbbells at home, 3 days a week: help me get stronger."
ANSWERS = {"approved": True}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Recording:
    """The offline model, remembering every request a stage sent it."""

    name = "recording"

    def __init__(self, capability: registry.Capability) -> None:
        self.requests: list[LLMRequest] = []
        self._scripted = ScriptedProvider(capability.offline_policy)

    def complete(self, request: LLMRequest) -> LLMResult:
        self.requests.append(request)
        return self._scripted.complete(request)

    def prompts(self, stage: str) -> list[str]:
        return [r.messages[0]["content"] for r in self.requests if r.stage == stage]


def configs(store: InMemoryAgentStore | None = None, clock: Clock | None = None, **kwargs: Any) -> AgentConfigs:
    return AgentConfigs(
        store if store is not None else InMemoryAgentStore(),
        registry.default_registry(),
        environment_models=["gpt-4o-mini", "gpt-4.1"],
        clock=clock or Clock(),
        **kwargs,
    )


def run(agents: AgentConfigs, model: str | None = None) -> tuple[Any, Recording, InMemoryUsageStore]:
    capability = registry.load(FITNESS)
    model_ = Recording(capability)
    usage = InMemoryUsageStore()
    driver = DirectDriver(capability, llm=model_, agents=agents, usage=usage)
    envelope = driver.run(GOAL, answer_with=lambda _: ANSWERS, model=model)
    return envelope, model_, usage


# -- the rules a version obeys ----------------------------------------------------------------------


def test_version_one_is_the_capability_as_shipped():
    # Given fitness_coach as capability.toml ships it
    capability = registry.load(FITNESS)
    # When its assess agent's first version is made
    first = rules.seed(capability, rules.agent_of(capability, "assess"))
    # Then it is the shipped prompt, numbered 1, from capability.toml
    assert (first.version, first.source, first.prompt) == (1, "capability.toml", capability.prompts["assess"])


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"model": "no-such-model"}, "no price for model 'no-such-model'"),
        ({"fallback_model": "mystery-7b"}, "fallback_model: no price"),
        ({"prompt": "You coach {{agent}} for {{user_secret}}"}, "unknown template variable(s) ['user_secret']"),
        ({"prompt": "unclosed {{agent"}, "unclosed"),
        ({"prompt": "   "}, "empty"),
        ({"tools": ["fs.write"]}, "not tools stage 'assess' declares"),
    ],
)
def test_a_version_its_agent_cannot_run_is_refused_with_the_reason(settings, problem):
    # Given fitness_coach's assess agent (no tools, asks its model)
    capability = registry.load(FITNESS)
    agent = rules.agent_of(capability, "assess")
    # When settings it cannot run are checked / Then the error names the problem
    with pytest.raises(AgentConfigError, match=problem.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        rules.check(capability, agent, AgentSettings.model_validate(settings))


@given(st.lists(st.sampled_from(["repo.list", "repo.grep", "repo.read", "repo.symbol", "fs.write", "web.get"])))
def test_a_version_never_enables_a_tool_its_stage_does_not_declare(tools):
    # Given code_analysis's investigator-like stage with the tools it declares
    capability = registry.load("code_analysis")
    agent = next(a for a in capability.pipeline.agents if a.has_tools)
    declared = set(rules.declared_tools(capability, agent))
    settings = AgentSettings(tools=list(dict.fromkeys(tools)))
    # When any set of tools is asked for / Then it is accepted exactly when the stage declares every one
    if set(tools) <= declared:
        rules.check(capability, agent, settings)
        assert (
            set(
                rules.applied(
                    agent,
                    rules.AgentVersion(
                        **settings.model_dump(), capability="c", agent=agent.name, version=2, created_by="op"
                    ),
                ).allowed_tools
                or []
            )
            <= declared
        )
    else:
        with pytest.raises(AgentConfigError, match="not tools stage"):
            rules.check(capability, agent, settings)


def test_a_template_renders_its_variables_and_leaves_json_alone():
    # Given a prompt with a variable and a JSON example
    template = 'You are {{ agent }} of {{capability}}. Reply like {"level": "beginner"}.'
    # When it is rendered / Then the variables are filled in and the braces of the JSON kept
    assert rules.render(template, {"agent": "assess", "capability": "fitness_coach"}) == (
        'You are assess of fitness_coach. Reply like {"level": "beginner"}.'
    )


# -- operators change versions; new missions pin them ------------------------------------------------


def test_a_promoted_prompt_runs_the_next_mission_and_a_rollback_restores_it():
    # Given fitness_coach with nothing written yet (every agent on version 1)
    agents = configs()
    shipped = registry.load(FITNESS).prompts["assess"]
    # When an operator creates a new assess prompt and promotes it
    created = agents.create(FITNESS, "assess", AgentSettings(prompt="Coach v2 for {{capability}}."), "ops@x")
    agents.promote(FITNESS, "assess", created.version, "ops@x")
    after_promotion, model, _ = run(agents)
    # Then the next mission pins version 2 and its assess stage sends the new prompt
    assert created.version == 2 and after_promotion.agents["assess"] == 2
    assert model.prompts("assess") == ["Coach v2 for fitness_coach."]
    # When the operator rolls back
    agents.rollback(FITNESS, "assess", "ops@x")
    after_rollback, model, _ = run(agents)
    # Then the mission after that runs version 1 again: the shipped prompt
    assert after_rollback.agents["assess"] == 1 and model.prompts("assess") == [shipped]
    # And the audit trail says who did what, newest first
    trail = [(e.action, e.actor, e.detail.get("to", e.detail.get("version"))) for e in agents.audit(FITNESS, "assess")]
    assert trail == [
        ("rollback", "ops@x", 1),
        ("promote", "ops@x", 2),
        ("create", "ops@x", 2),
        ("seed", "capability.toml", None),
    ]


def test_a_mission_started_before_a_promotion_keeps_its_version():
    # Given a mission that pinned assess version 1 when it started
    agents = configs()
    capability = registry.load(FITNESS)
    model = Recording(capability)
    driver = DirectDriver(capability, llm=model, agents=agents)
    pins = agents.pins(FITNESS)
    # When an operator promotes a new prompt while it waits, and the mission resumes
    agents.promote(FITNESS, "assess", agents.create(FITNESS, "assess", AgentSettings(prompt="new"), "op").version, "op")
    agents.forget(FITNESS)
    # Then each of its stages still runs the version it pinned (read by number, not "the active one")
    version = driver.services.agents(FITNESS, "assess", pins["assess"])  # type: ignore[misc]
    assert version.version == 1 and version.prompt == capability.prompts["assess"]
    assert agents.pins(FITNESS)["assess"] == 2


def test_another_warm_function_sees_a_promotion_within_its_cache_time():
    # Given two warm functions on one store: one serves the operator, the other starts missions
    store, clock = InMemoryAgentStore(), Clock()
    operator, starter = configs(store, clock, cache_seconds=60), configs(store, clock, cache_seconds=60)
    assert starter.pins(FITNESS)["assess"] == 1
    # When the operator promotes version 2
    operator.promote(
        FITNESS, "assess", operator.create(FITNESS, "assess", AgentSettings(temperature=0.1), "op").version, "op"
    )
    # Then the starter keeps its cached pins (no read) until its cache time has passed, then sees version 2
    reads = store.reads
    assert starter.pins(FITNESS)["assess"] == 1 and store.reads == reads
    clock.now += 61
    assert starter.pins(FITNESS)["assess"] == 2
    # and the operator's own process sees it at once
    assert operator.pins(FITNESS)["assess"] == 2


def test_a_disabled_agent_starts_no_mission_until_enabled():
    # Given an operator disabled fitness_coach's nutrition agent
    agents = configs()
    agents.set_enabled(FITNESS, "nutrition", False, "op")
    # When a mission would start / Then it is refused, naming the agent
    with pytest.raises(AgentDisabled, match="nutrition"):
        agents.pins(FITNESS)
    # and once it is enabled again missions start
    agents.set_enabled(FITNESS, "nutrition", True, "op")
    assert agents.pins(FITNESS)["nutrition"] == 1


def test_clone_diff_and_the_errors_operators_meet():
    # Given versions 1 (shipped) and 2 (another temperature and model) of assess
    agents = configs()
    second = agents.create(FITNESS, "assess", AgentSettings(temperature=0.3, model="gpt-4.1"), "op", note="cooler")
    # When version 1 is cloned / Then the clone is version 3 with version 1's settings
    clone = agents.clone(FITNESS, "assess", 1, "op")
    assert (clone.version, clone.source) == (3, "clone of 1")
    assert clone.settings() == agents.version(FITNESS, "assess", 1).settings()
    # and a diff names exactly what changed
    assert agents.diff(FITNESS, "assess", 1, second.version) == {
        "model": {"from": None, "to": "gpt-4.1"},
        "temperature": {"from": None, "to": 0.3},
    }
    # and the errors are the domain's: 404, 409
    with pytest.raises(NotFound):
        agents.promote(FITNESS, "assess", 9, "op")
    with pytest.raises(NotFound):
        agents.create(FITNESS, "no_such_agent", AgentSettings(), "op")
    with pytest.raises(ConflictError):
        agents.promote(FITNESS, "assess", 1, "op")  # already active
    with pytest.raises(ConflictError):
        agents.rollback(FITNESS, "workout", "op")  # nothing to roll back to


def test_two_writes_from_the_same_read_do_not_both_land():
    # Given two operators who read assess's state at the same revision
    store = InMemoryAgentStore()
    agents = configs(store)
    agents.deploy(FITNESS)
    state = store.state(FITNESS, "assess")
    assert state is not None
    first = rules.with_enabled(state, False, "a")
    second = rules.with_enabled(state, False, "b")
    store.put_state(first, rules.AuditEntry(capability=FITNESS, agent="assess", actor="a", action="disable"))
    # When the second writes / Then it is refused: nothing it did is stored
    with pytest.raises(ConflictError):
        store.put_state(second, rules.AuditEntry(capability=FITNESS, agent="assess", actor="b", action="disable"))
    assert [e.actor for e in store.audit(FITNESS, "assess")] == ["a", "capability.toml"]


# -- every deploy stores what capability.toml ships -----------------------------------------------------


def shipping(prompt: str) -> registry.Capability:
    """fitness_coach shipping `prompt` for assess (a later deploy's capability.toml)."""
    return dataclasses.replace(registry.load(FITNESS), prompts={**registry.load(FITNESS).prompts, "assess": prompt})


def redeployed(store: InMemoryAgentStore, prompt: str) -> AgentConfigs:
    return AgentConfigs(
        store,
        registry.default_registry().including(shipping(prompt)),
        environment_models=["gpt-4o-mini", "gpt-4.1"],
        clock=Clock(),
    )


def test_the_first_deploy_stores_version_one_and_a_later_capability_toml_cannot_change_it():
    # Given a stack deployed once (nothing written by an operator)
    store = InMemoryAgentStore()
    first = configs(store).deploy(FITNESS)
    agents = [agent.name for agent in registry.load(FITNESS).pipeline.agents]
    assert [(r["agent"], r["outcome"], r["version"]) for r in first] == [(name, "seeded", 1) for name in agents]
    shipped = registry.load(FITNESS).prompts["assess"]
    # When the next deploy ships another assess prompt
    later = redeployed(store, "You assess {{agent}} with a new rubric.")
    report = {r["agent"]: (r["outcome"], r["version"]) for r in later.deploy(FITNESS)}
    # Then version 1 is still the prompt it stored first: a mission pinned to 1 runs what it began with
    assert later.pinned(FITNESS, "assess", 1).prompt == shipped
    # And the new prompt is version 2, active for new missions (nobody had chosen another)
    assert report == {name: ("promoted", 2) if name == "assess" else ("unchanged", 1) for name in agents}
    assert later.pins(FITNESS)["assess"] == 2
    assert later.pinned(FITNESS, "assess", 2).prompt == "You assess {{agent}} with a new rubric."
    # And a rollback brings back the first deploy's prompt; the audit trail names the deploy
    later.rollback(FITNESS, "assess", "op")
    assert later.pins(FITNESS)["assess"] == 1
    assert [e.action for e in store.audit(FITNESS, "assess")] == ["rollback", "deploy", "seed"]


def test_a_deploy_stores_its_version_but_never_replaces_an_operators_choice():
    # Given an operator promoted a prompt of their own over the API
    store = InMemoryAgentStore()
    agents = configs(store)
    agents.deploy(FITNESS)
    mine = agents.create(FITNESS, "assess", AgentSettings(prompt="Operator's prompt for {{agent}}"), "op")
    agents.promote(FITNESS, "assess", mine.version, "op")
    # When a deploy ships another capability.toml prompt
    later = redeployed(store, "Shipped again.")
    report = {r["agent"]: (r["outcome"], r["version"]) for r in later.deploy(FITNESS)}
    # Then it is stored as version 3 for operators to promote, and the operator's version stays active
    assert report["assess"] == ("stored", 3)
    assert later.pins(FITNESS)["assess"] == mine.version
    assert store.audit(FITNESS, "assess")[0].detail == {"version": 3, "promoted": False, "active": mine.version}


def test_deploying_the_same_capability_toml_again_changes_nothing():
    # Given a deployed stack
    store = InMemoryAgentStore()
    configs(store).deploy(FITNESS)
    audit = store.audit(FITNESS, "assess")
    # When CloudFormation runs the deploy again (an update with the same code, a retried custom resource)
    report = configs(store).deploy(FITNESS)
    # Then nothing is stored
    assert {r["outcome"] for r in report} == {"unchanged"}
    assert store.audit(FITNESS, "assess") == audit and store.state(FITNESS, "assess").latest == 1


@given(st.lists(st.sampled_from(["a {{agent}}", "b {{agent}}", "c {{agent}}"]), min_size=1, max_size=6))
def test_whatever_deploys_follow_each_other_every_stored_version_stays_as_it_was(prompts):
    # Given deploys shipping the prompts in turn
    store = InMemoryAgentStore()
    seen: dict[int, str | None] = {}
    for prompt in prompts:
        agents = redeployed(store, prompt)
        agents.deploy(FITNESS)
        # Then each version stored keeps its prompt, and the active one is what was deployed last
        for version in store.versions(FITNESS, "assess"):
            assert seen.setdefault(version.version, version.prompt) == version.prompt
        assert agents.pinned(FITNESS, "assess", agents.pins(FITNESS)["assess"]).prompt == prompt


# -- a model per mission ---------------------------------------------------------------------------------


def test_the_model_a_mission_names_reaches_every_stage_over_the_versions():
    # Given assess's active version names gpt-4.1
    agents = configs()
    agents.promote(
        FITNESS, "assess", agents.create(FITNESS, "assess", AgentSettings(model="gpt-4.1"), "op").version, "op"
    )
    # When a mission runs without a model of its own / Then assess asks the version's, the others the environment's
    first, model, usage = run(agents)
    assert {r.stage: r.model for r in model.requests} == {"assess": "gpt-4.1", "workout": None, "nutrition": None}
    # And every call was recorded with its stage, the version it ran, the provider and the outcome
    assert sorted((u.stage, u.version, u.provider, u.outcome) for u in usage.for_mission(first.mission_id)) == [
        ("assess", 2, "recording", "ok"),
        ("nutrition", 1, "recording", "ok"),
        ("workout", 1, "recording", "ok"),
    ]
    # When a mission names gpt-4o-mini / Then every stage asks it, the version's model notwithstanding
    envelope, model, usage = run(agents, model="gpt-4o-mini")
    assert envelope.model == "gpt-4o-mini" and {r.model for r in model.requests} == {"gpt-4o-mini"}
    assert len(usage.for_mission(envelope.mission_id)) == 3


@pytest.mark.parametrize("model", ["gpt-5", "no-such-model"])
def test_a_model_the_capability_may_not_use_here_is_refused(model):
    # Given this environment allows gpt-4o-mini and gpt-4.1 / When a mission names another / Then it is refused
    with pytest.raises(MissionRequestError, match=f"model '{model}'"):
        configs().check_model(FITNESS, model)


class RacedStore(InMemoryAgentStore):
    """An agent store where another writer stores the same version just before the first add_version."""

    def __init__(self) -> None:
        super().__init__()
        self.race = False

    def add_version(self, version, state, audit) -> None:
        if self.race:
            self.race = False
            super().add_version(version, state, audit)  # theirs
            raise ConflictError("changed meanwhile")
        super().add_version(version, state, audit)


def test_a_deploy_racing_another_write_reads_again_and_stores_once():
    # Given a deploy whose first write to assess loses to a concurrent one (a retried custom resource)
    store = RacedStore()
    configs(store).deploy(FITNESS)
    store.race = True
    # When it deploys / Then it reads again and finds its version already stored: nothing twice
    report = {r["agent"]: r["outcome"] for r in redeployed(store, "Raced {{agent}}").deploy(FITNESS)}
    assert report["assess"] == "unchanged"
    assert [v.version for v in store.versions(FITNESS, "assess")] == [1, 2]
