"""One conformance suite for the agent and usage stores: in memory (the reference) and DynamoDB in moto."""

from __future__ import annotations

import pytest

from missions.adapters.memory.agents import InMemoryAgentStore, InMemoryUsageStore
from missions.core.cost.usage import UsageRecord
from missions.core.errors import ConflictError
from missions.core.llm.agents import AgentState, AgentVersion, AuditEntry
from missions.core.specs import AGENTS, USAGE
from missions.ports.agents import count_ended_mission

REGION = "us-east-1"


@pytest.fixture(params=["memory", "dynamodb"])
def stores(request, monkeypatch):
    if request.param == "memory":
        yield InMemoryAgentStore(), InMemoryUsageStore()
        return
    import boto3
    from moto import mock_aws

    from missions.adapters.dynamodb.agents import DynamoAgentStore, DynamoUsageStore
    from missions.adapters.dynamodb.tables import table_definition

    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        ddb.create_table(**table_definition(AGENTS, "t-agents"))
        ddb.create_table(**table_definition(USAGE, "t-usage"))
        yield DynamoAgentStore("t-agents", client=ddb), DynamoUsageStore("t-usage", client=ddb)


def version(n: int, agent: str = "assess", prompt: str = "p") -> AgentVersion:
    return AgentVersion(
        capability="cap",
        agent=agent,
        version=n,
        prompt=prompt,
        created_by="op",
        created_at="2026-11-01T00:00:00.000+00:00",
    )


def audit(action: str = "create", agent: str = "assess", actor: str = "op") -> AuditEntry:
    return AuditEntry(capability="cap", agent=agent, actor=actor, action=action)  # type: ignore[arg-type]


def test_versions_and_states_read_back_as_written(stores):
    # Given version 1 and 2 of assess, and version 1 of plan
    agents, _ = stores
    agents.add_version(version(1), AgentState(capability="cap", agent="assess", revision=1), audit("seed"))
    state = AgentState(capability="cap", agent="assess", latest=2, revision=2)
    agents.add_version(version(2, prompt="second"), state, audit())
    agents.add_version(
        version(1, "plan"), AgentState(capability="cap", agent="plan", revision=1), audit("seed", "plan")
    )
    # When they are read / Then each comes back as written, states in one read, versions oldest first
    assert agents.version("cap", "assess", 2) == version(2, prompt="second")
    assert agents.version("cap", "assess", 3) is None and agents.state("cap", "none") is None
    assert [v.version for v in agents.versions("cap", "assess")] == [1, 2]
    assert [(s.agent, s.latest) for s in agents.states("cap")] == [("assess", 2), ("plan", 1)]
    assert [e.action for e in agents.audit("cap", "assess")] == ["create", "seed"]


def test_a_write_on_a_stale_revision_or_an_existing_version_changes_nothing(stores):
    # Given assess at revision 1 with version 1
    agents, _ = stores
    agents.add_version(version(1), AgentState(capability="cap", agent="assess", revision=1), audit("seed"))
    # When version 1 is stored again, or a state written over a revision it did not read
    with pytest.raises(ConflictError):
        agents.add_version(version(1, prompt="x"), AgentState(capability="cap", agent="assess", revision=2), audit())
    with pytest.raises(ConflictError):
        agents.put_state(AgentState(capability="cap", agent="assess", enabled=False, revision=3), audit("disable"))
    # Then nothing of either was stored, not even their audit entries
    assert agents.version("cap", "assess", 1) == version(1)
    state = agents.state("cap", "assess")
    assert state is not None and (state.revision, state.enabled) == (1, True)
    assert [e.action for e in agents.audit("cap", "assess")] == ["seed"]
    # and a write over the revision it read lands
    agents.put_state(AgentState(capability="cap", agent="assess", enabled=False, revision=2), audit("disable"))
    assert agents.state("cap", "assess").enabled is False  # type: ignore[union-attr]


def test_usage_is_listed_per_mission_and_summed_per_user_and_for_everyone_once_its_mission_ended(stores):
    # Given three calls: two of alice's mission (one failed), one of bob's
    _, usage = stores
    calls = [
        UsageRecord(mission_id="m1", user_id="alice", capability="cap", stage="assess", agent="assess", version=2,
                    provider="openai", model="gpt-4o-mini", tokens_in=100, tokens_out=20, cost_usd=0.0001,
                    latency_ms=12.5, at="2026-11-01T00:00:00.001+00:00"),
        UsageRecord(mission_id="m1", user_id="alice", capability="cap", stage="assess", agent="assess", version=2,
                    provider="openai", model="gpt-4o-mini", outcome="transient_error", error="HTTP 503",
                    latency_ms=7.5, at="2026-11-01T00:00:01.001+00:00"),
        UsageRecord(mission_id="m2", user_id="bob", capability="cap", stage="assess", agent="assess", version=1,
                    provider="bedrock", model="gpt-4.1", tokens_in=10, tokens_out=5, cost_usd=0.00006, latency_ms=3),
    ]  # fmt: skip
    for call in calls:
        usage.record(call)
    # When they are read / Then a mission's calls come back in order, whole, and no totals count them yet
    assert usage.for_mission("m1") == calls[:2]
    assert usage.totals("cap", "alice") == [] and usage.totals("cap") == []
    # When both missions ended and their calls were added to the totals
    count_ended_mission(usage, "m1")
    usage.add_to_totals(usage.for_mission("m2"))
    # Then the totals are per (agent, version, model): the user's own, or everyone's
    mine = usage.totals("cap", "alice")
    assert [(t.version, t.calls, t.errors, t.tokens_in, t.cost_usd, t.latency_ms) for t in mine] == [
        (2, 2, 1, 100, 0.0001, 20.0)
    ]
    everyone = {(t.version, t.model): t.calls for t in usage.totals("cap")}
    assert everyone == {(2, "gpt-4o-mini"): 2, (1, "gpt-4.1"): 1}
    assert usage.totals("other") == []


def call(user: str, cost: float, at: str, mission: str = "m1") -> UsageRecord:
    return UsageRecord(
        mission_id=mission, user_id=user, capability="cap", stage="s", agent="s", provider="openai",
        model="gpt-4o-mini", tokens_in=10, tokens_out=5, cost_usd=cost, at=at,
    )  # fmt: skip


def test_each_paid_call_adds_its_dollars_to_its_users_day_and_says_the_total(stores):
    # Given calls of alice on two days and one of bob's
    _, usage = stores
    # When they are recorded / Then each paid call returns its user's day total as it left it
    assert usage.record(call("alice", 0.1, "2026-11-01T10:00:00+00:00")) == 0.1
    assert usage.record(call("alice", 0.2, "2026-11-01T23:59:59+00:00", mission="m2")) == pytest.approx(0.3)
    assert usage.record(call("alice", 0.05, "2026-11-02T00:00:00+00:00")) == 0.05
    assert usage.record(call("bob", 0.7, "2026-11-01T12:00:00+00:00")) == 0.7
    # and a call that cost nothing writes and reads no spend
    assert usage.record(call("alice", 0.0, "2026-11-01T12:00:00+00:00")) is None
    # and a day named by the caller (the dev server's clock) is the one counted
    assert usage.record(call("carol", 0.01, "2026-11-01T12:00:00+00:00"), day="2026-12-25") == 0.01
    assert usage.spent("alice", "2026-11-01") == pytest.approx(0.3)
    assert usage.spent("alice", "2026-11-02") == 0.05
    assert usage.spent("carol", "2026-12-25") == 0.01 and usage.spent("carol", "2026-11-01") == 0.0
    assert usage.spent("nobody", "2026-11-01") == 0.0


def test_a_users_own_budget_is_kept_until_dropped(stores):
    _, usage = stores
    assert usage.budget_of("alice") is None
    usage.set_budget("alice", 2.5)
    usage.set_budget("bob", 0.0)
    assert usage.budget_of("alice") == 2.5 and usage.budget_of("bob") == 0.0
    usage.set_budget("alice", None)
    assert usage.budget_of("alice") is None and usage.budget_of("bob") == 0.0


def test_an_ended_missions_calls_take_one_totals_write_per_version_model_and_owner(monkeypatch):
    """DynamoDB: the totals cost a write per (agent, version, model) and owner, not per call."""
    import boto3
    from moto import mock_aws

    from missions.adapters.dynamodb.agents import DynamoUsageStore
    from missions.adapters.dynamodb.tables import table_definition

    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        monkeypatch.setenv(name, value)
    with mock_aws():
        # Given alice's mission of five calls to one agent version and model, and the store's updates counted
        ddb = boto3.client("dynamodb", region_name=REGION)
        ddb.create_table(**table_definition(USAGE, "t-usage"))
        usage = DynamoUsageStore("t-usage", client=ddb)
        for n in range(5):
            usage.record(call("alice", 0.001, f"2026-11-01T10:00:0{n}+00:00"))
        updated: list[str] = []
        real = ddb.update_item

        def counted(**request):
            updated.append(request["Key"]["pk"]["S"])
            return real(**request)

        monkeypatch.setattr(ddb, "update_item", counted)
        # When the mission ended and its calls were added to the totals
        count_ended_mission(usage, "m1")
        # Then two writes did it, alice's totals and everyone's, each counting all five calls
        assert sorted(updated) == ["totals#*", "totals#alice"]
        assert [(t.calls, t.cost_usd) for t in usage.totals("cap", "alice")] == [(5, 0.005)]
        assert [t.calls for t in usage.totals("cap")] == [5]
