"""The Home Assistant analyst end to end, as its users meet it: over HTTP (the dev server: the deployed
API's handlers over the emulation, the offline model), on the bundled sample home and again against a
fake HA server speaking HA's REST API (so the real client runs over HTTP).

Each flow of seed 002 runs to completion: an energy analysis whose figures are the sample's, a fault
found in the error log and cited, a review of the automations, a device switched after approval, an
automation proposed, approved, deployed and rolled back; a schedule and a webhook each leave an
insight; HA down, a rejected token, an unknown entity and an invalid automation each end with a reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from capabilities.home_assistant.dev.fake_server import serve
from capabilities.home_assistant.dev.sample import SampleHome
from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from missions.service.triggers.webhooks import sign
from tests.e2e.test_dev_server import Client, wait_for

pytestmark = pytest.mark.e2e
SECRET = "whsec_aG9tZSBhc3Npc3RhbnQgc2VjcmV0"  # Standard Webhooks: whsec_<base64 of the key>
TOKEN = "ha-long-lived-token-for-tests"
FACTS = SampleHome().facts
ENDED = {"completed", "failed", "cancelled"}


@pytest.fixture(scope="module", params=["sample", "rest"])
def home(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """The offline sample home, or the fake HA server serving the same home over HA's REST API."""
    if request.param == "sample":
        yield {"kind": "sample"}
        return
    with serve(SampleHome(), token=TOKEN) as fake, pytest.MonkeyPatch.context() as patch:
        patch.setenv("HA_URL", fake.url)
        patch.setenv("HA_TOKEN", TOKEN)
        yield {"kind": "rest", "fake": fake, "patch": patch}


@pytest.fixture(scope="module")
def server(home: dict[str, Any]) -> Iterator[DevServer]:
    sources = {"home_assistant": {"secret": SECRET, "user_id": "hank"}}
    cloud = LocalCloud(["home_assistant"], settings={"webhook_sources": sources})
    # 05:50 in Amsterdam: the daily insight schedule fires at 06:00
    with cloud, DevServer(cloud, port=0, clock_start=datetime(2026, 11, 24, 4, 50, tzinfo=UTC)) as dev:
        yield dev


def run(client: Client, goal: str, approve: bool | None = None) -> dict[str, Any]:
    """Start a mission and drive it to its end, answering every approval with `approve`."""
    status, created = client.call("POST", "/missions", {"capability": "home_assistant", "goal": goal})
    assert status == 202, created
    mission_id = created["mission_id"]
    for _ in range(6):
        mission = wait_for(client, mission_id, ENDED | {"interrupted"}, timeout=90)
        if mission["status"] in ENDED:
            return mission
        assert approve is not None, mission["pending_interrupt"]
        question = mission["pending_interrupt"]
        path = f"/missions/{mission_id}/interrupts/{question['interrupt_id']}"
        assert client.call("POST", path, {"approved": approve})[0] == 200
        wait_for_answered(client, mission_id, question["interrupt_id"])
    raise AssertionError(f"mission {mission_id} asked too many questions")


def wait_for_answered(client: Client, mission_id: str, interrupt_id: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        mission = client.call("GET", f"/missions/{mission_id}")[1]
        pending = mission.get("pending_interrupt") or {}
        if pending.get("interrupt_id") != interrupt_id:
            return
        time.sleep(0.05)


def insights(client: Client) -> list[dict[str, Any]]:
    status, page = client.call("GET", "/memory/home_assistant.insights")
    assert status == 200, page
    return [item["value"] for item in page["items"]]


def test_an_energy_analysis_gives_the_sample_homes_figures_and_keeps_its_insights(server: DevServer):
    ada = Client(server, "ada")
    mission = run(ada, "Analyze my energy usage this week")
    assert mission["status"] == "completed", mission
    answer = mission["result"]["answer"]
    # Then the week's consumption, the charger's share until its sensor failed, and the cost at the tariff
    assert f"{FACTS.week_energy_kwh:.1f} kWh" in answer  # 424.5
    assert "117.9 kWh" in answer and "no data since 2025-03-12 11:00" in answer
    assert f"{FACTS.week_energy_kwh * 0.30:.2f} EUR" in answer
    # and the insights are the user's, with their figures, over the API
    kept = insights(ada)
    total = next(i for i in kept if i["title"] == "Energy used")
    assert total["figures"]["kwh_period"] == pytest.approx(FACTS.week_energy_kwh, abs=0.05)
    assert total["entities"] == [FACTS.home_energy] and total["period_end"]
    assert insights(Client(server, "someone-else")) == []


def test_a_vanished_sensor_is_traced_to_its_failing_integration_with_the_log_lines_cited(server: DevServer):
    mission = run(Client(server, "bo"), "My car charger energy data disappeared")
    assert mission["status"] == "completed", mission
    answer, cited = mission["result"]["answer"], mission["result"]["citations"]
    assert "sensor.ev_charger_energy" in answer and "'wallbox' started failing" in answer
    log = SampleHome().error_log().splitlines()
    lines = {f"home-assistant.log:{n}" for n, text in enumerate(log, 1) if text in FACTS.ev_log_lines}
    assert len(lines) == 2 and lines <= set(cited)


def test_a_review_proposes_fixes_with_diffs_and_deploys_what_is_approved(server: DevServer):
    mission = run(Client(server, "cy"), "Review my automations", approve=True)
    assert mission["status"] == "completed", mission
    answer = mission["result"]["answer"]
    assert "Garage light when door opens' fired 12 time(s)" in answer
    assert f"Automation {FACTS.broken_automation_id}: deployed." in answer


def test_a_device_is_switched_only_after_approval_and_the_trace_is_safe(server: DevServer):
    dee = Client(server, "dee")
    status, created = dee.call(
        "POST", "/missions", {"capability": "home_assistant", "goal": "Turn on the living room lights"}
    )
    assert status == 202
    waiting = wait_for(dee, created["mission_id"], {"interrupted"}, timeout=90)
    question = waiting["pending_interrupt"]
    assert "light.turn_on on light.living_room_ceiling, light.living_room_floor_lamp" in question["question"]
    path = f"/missions/{created['mission_id']}/interrupts/{question['interrupt_id']}"
    assert dee.call("POST", path, {"approved": True})[0] == 200
    assert dee.call("POST", path, {"approved": True})[0] == 409  # approving twice switches once
    mission = wait_for(dee, created["mission_id"], ENDED, timeout=90)
    assert mission["status"] == "completed"
    assert "light.living_room_ceiling is on, light.living_room_floor_lamp is on" in mission["result"]["answer"]
    evaluation = dee.call("GET", f"/missions/{created['mission_id']}/evaluation")[1]
    safety = next(s for s in evaluation["scores"] if s["name"] == "tool_usage_safety")
    assert safety["passed"] and safety["detail"].startswith("1 call(s) with side effects")


def test_a_declined_change_ends_cleanly_and_changes_nothing(server: DevServer):
    mission = run(Client(server, "eve"), "Turn on the living room lights", approve=False)
    assert mission["status"] == "completed" and "light.turn_on: declined" in mission["result"]["answer"]


def test_an_automation_is_proposed_with_its_diff_approved_deployed_and_rolled_back(server: DevServer):
    fay = Client(server, "fay")
    status, created = fay.call(
        "POST", "/missions", {"capability": "home_assistant", "goal": "Turn off the office lights every night at 23:00"}
    )
    waiting = wait_for(fay, created["mission_id"], {"interrupted"}, timeout=90)
    question = waiting["pending_interrupt"]["question"]
    assert "create automation" in question and "+- trigger: time\n+  at: '23:00:00'" in question
    assert "+    - light.office_ceiling" in question
    path = f"/missions/{created['mission_id']}/interrupts/{waiting['pending_interrupt']['interrupt_id']}"
    assert fay.call("POST", path, {"approved": True})[0] == 200
    deployed = wait_for(fay, created["mission_id"], ENDED, timeout=90)
    assert "turn_off_the_office_lights_every_night_at_23_00: deployed" in deployed["result"]["answer"]
    # When the user rolls it back in a later mission
    undone = run(fay, "Roll back the office lights automation", approve=True)
    assert undone["status"] == "completed", undone
    assert "rolled back" in undone["result"]["answer"]
    # Then the deployment is marked as undone in the user's memory
    status, item = fay.call("GET", "/memory/home_assistant.deployments/turn_off_the_office_lights_every_night_at_23_00")
    assert status == 200 and item["value"]["rolled_back"] is True


def test_an_unknown_entity_ends_with_its_reason(server: DevServer):
    mission = run(Client(server, "gus"), "Turn on the disco ball lights in the attic")
    assert mission["status"] == "completed" and mission["terminal_reason"] == "unknown_entity"
    assert "I could not work on your home" in mission["result"]["answer"]


def test_a_webhook_from_home_assistant_starts_a_diagnosis_that_keeps_an_insight(server: DevServer):
    hank = Client(server, "hank")
    body = {"type": "state_changed", "entity_id": "sensor.ev_charger_energy", "new_state": "unavailable"}
    raw, timestamp = json.dumps(body).encode(), str(int(time.time()))
    headers = {
        "webhook-id": "ha-1",
        "webhook-timestamp": timestamp,
        "webhook-signature": sign(SECRET, "ha-1", timestamp, raw),
    }
    status, accepted = Client(server, None).call("POST", "/webhooks/home_assistant", raw=raw, headers=headers)
    assert status == 202, accepted
    deadline = time.monotonic() + 90
    while not [i for i in insights(hank) if i["specialist"] == "diagnostic"]:
        assert time.monotonic() < deadline, "no diagnosis was kept"
        time.sleep(0.2)
    found = [i for i in insights(hank) if "sensor.ev_charger_energy" in i["entities"]]
    assert found and found[0]["evidence"]


def test_the_daily_schedule_leaves_an_energy_insight_for_users_who_opted_in(server: DevServer):
    ivy = Client(server, "ivy")
    assert ivy.call("PUT", "/memory/home_assistant.daily/optin", {"value": {"since": "today"}})[0] == 200
    status, clock = Client(server, None).call("POST", "/_dev/clock", {"advance_seconds": 20 * 60})
    assert status == 200 and clock["fired"], clock
    deadline = time.monotonic() + 90
    while not [i for i in insights(ivy) if i["specialist"] == "energy"]:
        assert time.monotonic() < deadline, "the daily insight was not kept"
        time.sleep(0.2)
    daily = next(i for i in insights(ivy) if i["title"] == "Energy used")
    assert daily["figures"]["kwh_period"] > 0


def test_the_cli_runs_the_flows_on_the_sample_home():
    from tests.e2e.cli.test_cli import missions

    analyzed = missions("run", "home_assistant", "Analyze my energy usage this week", "--json")
    assert analyzed.returncode == 0, analyzed.stderr
    outcome = json.loads(analyzed.stdout)
    assert outcome["terminal_reason"] == "completed" and f"{FACTS.week_energy_kwh:.1f} kWh" in outcome["answer"]
    switched = missions("run", "home_assistant", "Turn on the living room lights", "--answer", "yes")
    assert switched.returncode == 0, switched.stderr
    shown = " ".join(switched.stdout.split())  # as printed, wrapped to the terminal
    assert "Allow ha.call_service (write): light.turn_on on light.living_room_ceiling" in shown
    assert "light.living_room_floor_lamp is on" in shown


def test_a_follow_up_in_the_chat_analyses_the_same_entities_for_the_period_it_names(server: DevServer):
    from openai import OpenAI

    client = OpenAI(base_url=f"{server.url}/v1", api_key="dev:kim", max_retries=0, timeout=120)
    # Given an energy analysis of today, asked in the chat
    messages: list[Any] = [{"role": "user", "content": "Analyze my energy usage today"}]
    first = client.chat.completions.create(model="home_assistant", messages=messages)
    today = first.choices[0].message.content or ""
    assert "kWh" in today and f"{FACTS.week_energy_kwh:.1f} kWh" not in today, today
    kim = Client(server, "kim")
    conversation_id = (first.model_extra or {})["conversation_id"]
    in_focus = kim.call("GET", f"/conversations/{conversation_id}")[1]["focus"]
    assert FACTS.home_energy in in_focus
    # When the user follows up naming only a period, letting the runtime choose
    messages += [{"role": "assistant", "content": today}, {"role": "user", "content": "and last week?"}]
    second = client.chat.completions.create(model="missions", messages=messages)
    week = second.choices[0].message.content or ""
    # Then it is the same analysis over the past week: the sample week's consumption
    assert f"{FACTS.week_energy_kwh:.1f} kWh" in week, week
    assert (second.model_extra or {})["conversation_id"] == conversation_id
    conversation = kim.call("GET", f"/conversations/{conversation_id}")[1]
    assert [t["capability"] for t in conversation["turns"]] == ["home_assistant", "home_assistant"]
    # and over the entities the first analysis used, which the conversation kept in focus
    mission = kim.call("GET", f"/missions/{(second.model_extra or {})['mission_id']}")[1]
    used = {e for insight in mission["result"]["output"]["insights"] for e in insight["entities"]}
    assert used and used <= set(in_focus)
