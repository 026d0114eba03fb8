"""home_assistant when things go wrong, and its guards: HA down, a rejected token, an invalid automation,
an approval that runs exactly the call shown, and automations checked in shape and in meaning."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from capabilities.home_assistant.automation import diff, semantic_errors, structural_errors
from capabilities.home_assistant.dev.fake_server import serve
from capabilities.home_assistant.dev.sample import SampleHome
from capabilities.home_assistant.models import ArchitectPlan, AutomationDraft
from capabilities.home_assistant.policy import offline_policy
from missions.core.capability import registry as registry
from missions.core.llm.provider import LLMRequest, LLMResult
from tests.support.driver import DirectDriver

CAPABILITY = registry.load("home_assistant")
TOKEN = "a-long-lived-token"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    with serve(SampleHome(), token=TOKEN) as server:
        monkeypatch.setenv("HA_URL", server.url)
        monkeypatch.setenv("HA_TOKEN", TOKEN)
        yield server


def test_home_assistant_down_ends_the_mission_with_that_reason(fake: Any):
    fake.down()
    driver = DirectDriver(CAPABILITY)
    envelope = driver.run("Analyze my energy usage this week", user_id="u-down")
    assert envelope.terminal_reason == "ha_unreachable"
    assert driver.stores.missions.get(envelope.mission_id).status == "failed"  # never reported as done
    answer = envelope.outputs["report"]["answer"]
    assert answer.startswith("I could not work on your home:") and "127.0.0.1" in answer


def test_a_rejected_token_ends_the_mission_with_that_reason_and_never_shows_the_token(
    fake: Any, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("HA_TOKEN", "not-the-token")
    envelope = DirectDriver(CAPABILITY).run("Turn on the living room lights", user_id="u-token")
    assert envelope.terminal_reason == "ha_token_rejected"
    assert "not-the-token" not in envelope.model_dump_json()


class Proposing:
    """The offline model, except that the architect proposes the automation a test gives."""

    name = "proposing"

    def __init__(self, automation: dict[str, Any]):
        self.automation = automation

    def complete(self, request: LLMRequest) -> LLMResult:
        if request.stage == "architect":
            plan = ArchitectPlan(
                route="propose",
                entities=["light.office_ceiling"],
                automation=AutomationDraft.model_validate(self.automation),
            )
            return LLMResult(output=plan, model="proposing")
        return LLMResult(output=offline_policy(request), model="proposing")


def test_an_invalid_automation_carries_its_reasons_and_is_never_offered():
    invalid = {
        "alias": "Lights off at night",
        "triggers": [{"trigger": "time"}],  # no `at`
        "actions": [{"action": "light.turn_off", "target": {"entity_id": "light.office_ceiling"}}],
    }
    driver = DirectDriver(CAPABILITY, llm=Proposing(invalid))
    asked: list[Any] = []
    envelope = driver.run(
        "Turn off the office lights at night", answer_with=lambda i: asked.append(i) or {"approved": True}
    )
    assert asked == [] and envelope.terminal_reason == "invalid_proposal"
    assert driver.stores.missions.get(envelope.mission_id).status == "failed"
    proposal = envelope.outputs["proposals"]["proposals"][0]
    assert not proposal["valid"] and proposal["reasons"] == [
        "triggers.0: Value error, a time trigger needs `at` as HH:MM[:SS] (or an input_datetime entity)"
    ]
    assert "is not valid" in envelope.outputs["report"]["answer"]


def test_an_automation_naming_what_the_home_lacks_is_invalid():
    made_up = {
        "alias": "Disco",
        "triggers": [{"trigger": "time", "at": "22:00"}],
        "actions": [{"action": "light.party_mode", "target": {"entity_id": "light.disco_ball", "area_id": "attic"}}],
    }
    envelope = DirectDriver(CAPABILITY, llm=Proposing(made_up)).run("Disco at ten", user_id="u-disco")
    reasons = envelope.outputs["proposals"]["proposals"][0]["reasons"]
    assert reasons == [
        "no entity light.disco_ball in this home",
        "no service light.party_mode in this home",
        "no area attic in this home",
    ]


class Fickle:
    """The offline model, except that every architect answer proposes another time of day."""

    name = "fickle"

    def __init__(self) -> None:
        self.hours = itertools.count(20)
        self.asked = 0

    def complete(self, request: LLMRequest) -> LLMResult:
        if request.stage != "architect":
            return LLMResult(output=offline_policy(request), model="fickle")
        self.asked += 1
        at = f"{next(self.hours)}:00"
        automation = AutomationDraft(
            alias=f"Office lights off at {at}",
            triggers=[{"trigger": "time", "at": at}],
            actions=[{"action": "light.turn_off", "target": {"entity_id": ["light.office_ceiling"]}}],
        )
        return LLMResult(
            output=ArchitectPlan(route="propose", entities=["light.office_ceiling"], automation=automation),
            model="fickle",
        )


def test_an_approval_deploys_exactly_the_automation_shown_once_with_a_model_that_never_answers_alike():
    model = Fickle()
    asked: list[dict[str, Any]] = []

    def approve(interrupt: dict[str, Any]) -> dict[str, Any]:
        asked.append(interrupt)
        return {"approved": True}

    envelope = DirectDriver(CAPABILITY, llm=model).run(
        "Office lights off every evening", answer_with=approve, user_id="u-fickle"
    )
    assert model.asked == 1 and len(asked) == 1
    assert "at: '20:00'" in asked[0]["question"]
    assert envelope.outputs["deploy"]["results"] == {"office_lights_off_at_20_00": "deployed"}


def test_automations_are_checked_in_shape_and_shown_as_a_diff():
    good = {
        "alias": "Porch",
        "trigger": {"platform": "sun", "event": "sunset"},  # HA's older spellings are accepted
        "action": [{"service": "light.turn_on", "target": {"entity_id": "light.hallway"}}],
    }
    assert structural_errors(good) == []
    assert semantic_errors(good, ["light.hallway"], ["light.turn_on"], []) == []
    assert structural_errors({"alias": "x", "triggers": [], "actions": []})
    assert any(
        "domain.service" in e
        for e in structural_errors({"alias": "x", "triggers": [{"trigger": "sun"}], "actions": [{"action": "nope"}]})
    )
    shown = diff({"alias": "Porch", "mode": "single"}, {"alias": "Porch", "mode": "restart"}, "porch")
    assert "-mode: single\n+mode: restart" in shown


def test_a_deployment_that_ha_refuses_to_load_is_undone_and_says_why(monkeypatch: pytest.MonkeyPatch):
    from capabilities.home_assistant import tools

    # Given a home whose configuration check fails once the automation is written
    broken = SampleHome(config_errors="Invalid config for 'automation': required key 'triggers' not provided")
    monkeypatch.setitem(tools._SAMPLES, "u-refused", broken)
    driver = DirectDriver(CAPABILITY)
    envelope = driver.run(
        "Turn off the office lights every night at 23:00", answer_with=lambda i: {"approved": True}, user_id="u-refused"
    )
    # Then the automation is not left behind, the answer gives HA's reason, and the mission failed
    result = envelope.outputs["deploy"]["results"]["turn_off_the_office_lights_every_night_at_23_00"]
    assert result.startswith("refused: HA's configuration check refused it, nothing changed: Invalid config")
    assert envelope.terminal_reason == "deploy_refused"
    assert driver.stores.missions.get(envelope.mission_id).status == "failed"
    assert "turn_off_the_office_lights_every_night_at_23_00" not in [
        s.attributes.get("id") for s in broken.states() if s.domain == "automation"
    ]


class Charting:
    """The offline model, except that the energy specialist's script also draws a (tiny) chart."""

    name = "charting"

    def complete(self, request: LLMRequest) -> LLMResult:
        output = offline_policy(request)
        if request.stage == "energy":
            png = (
                "import base64\n"
                "open('chart.png', 'wb').write(base64.b64decode("
                "'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='))\n"
            )
            output = output.model_copy(update={"code": png + output.code})
        return LLMResult(output=output, model="charting")


def test_a_chart_a_script_draws_is_kept_as_an_artifact_of_the_mission():
    driver = DirectDriver(CAPABILITY, llm=Charting())
    envelope = driver.run("Analyze my energy usage this week", user_id="u-chart")
    assert envelope.outputs["energy"]["chart"] == "charts/energy_v1"  # its first version
    chart = driver.stores.artifacts.get(envelope.mission_id, "charts/energy").content
    assert chart["png_base64"].startswith("iVBORw0KGgo")  # a PNG, as the script wrote it


def test_statistics_that_do_not_come_fail_the_energy_analysis_with_has_reason_not_a_scripts(
    fake: Any, monkeypatch: pytest.MonkeyPatch
):
    # Given a home whose long-term statistics time out (the rest of its API answers)
    from capabilities.home_assistant.ha.port import HAUnreachable
    from capabilities.home_assistant.ha.rest import RestHomeAssistant

    def timed_out(*args: Any, **kwargs: Any) -> Any:
        raise HAUnreachable("Home Assistant at the fake is unreachable: no answer within 0.4 s")

    monkeypatch.setattr(RestHomeAssistant, "statistics", timed_out)
    # When an energy analysis runs
    driver = DirectDriver(CAPABILITY)
    envelope = driver.run("Analyze my energy usage this week", user_id="u-stats")
    # Then the energy specialist ran no script on missing data, and says what Home Assistant said
    findings = envelope.outputs["energy"]
    assert findings["ran"] and findings["insights"] == []
    assert (
        findings["error"].startswith("ha.statistics gave nothing to analyse")
        and "no answer within" in findings["error"]
    )
    assert findings["sandbox_ms"] == 0.0
