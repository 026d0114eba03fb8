"""The synthesized dev stack, deployed into moto's CloudFormation, runs a real mission.

Everything a mission touches comes from the deployment: table and bucket names, the state machine (the compiler's
definition with CloudFormation's substitutions), each function's environment. Every AWS call each function makes
is recorded and must be allowed by the role the template gave that function, so the access table is proven
sufficient as well as narrow. The deployment (`deployed`, in conftest.py) is made once for this module.
"""

from __future__ import annotations

import json
import re
import shlex
import time

from missions.core.capability import registry as registry
from missions.core.mission.refs import snapshot_key
from missions.core.specs import segment_machine_name, state_machine_name
from missions.local.devserver import http_event
from missions.service.repositories.archive import extract_snapshot
from missions.service.triggers.webhooks import sign
from tests.support.archives import tar_gz_bytes
from tests.support.deploy import (
    Need,
    allowed,
    needs,
    role_statements,
    table_arn,
)
from tests.support.deployed_stack import (
    GOAL,
    PROMPTS,
    ROOT,
    _api,
    _asked,
    _execution_of,
    _invoke,
    _wait_for_end,
    _walkthrough,
)
from tests.support.git_server import serve_git


def test_the_stack_deploys_completely(deployed):
    deployment, session = deployed
    # Then every function, the state machine and the tables exist
    installed = [registry.load(name) for name in registry.installed()]
    assert set(deployment.state_machines) == {state_machine_name("missions-dev", c.name) for c in installed}
    # and, as Express machines, the segments their stages run in (patch 4 keeps the declared type)
    assert set(deployment.segment_machines) == {segment_machine_name("missions-dev", c.name) for c in installed}
    services = sorted(c["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] for c in deployment.functions.values())
    assert services.count("missions-stage") == sum(len(c.pipeline.agents) for c in installed)  # one per stage
    assert {
        "missions-api",
        "missions-webhook",
        "missions-trigger",
        "missions-schedule",
        "missions-status",
        "missions-memory-stream",
        "missions-interrupt",
        "missions-sla",
        "missions-retention",
        "missions-repository-import",
        "missions-stream",
    } <= set(services)
    assert deployment.outputs["ApiUrlDDEE0114"].startswith("https://")
    # and the stream function's URL (patch 13 of missions.local.moto), in response-stream mode, is the output
    stream = deployment.function_named("missions-stream")
    url = session.client("lambda").get_function_url_config(FunctionName=stream)
    assert (url["InvokeMode"], url["AuthType"]) == ("RESPONSE_STREAM", "NONE")
    assert deployment.outputs["StreamUrl"] == url["FunctionUrl"]
    assert deployment.functions[stream]["Handler"] == "run.sh"


def test_a_code_analysis_mission_runs_through_the_deployed_state_machine(deployed):
    deployment, session = deployed
    # When a user starts a mission through the deployed API function
    status, created = _api(
        session,
        deployment,
        "POST",
        "/missions",
        {"capability": "code_analysis", "goal": GOAL, "context": {"repo": str(ROOT)}},
    )
    assert status == 202, created
    execution_arn = _execution_of(session, deployment, created["mission_id"])
    ended = _wait_for_end(session, execution_arn)
    # Then the execution succeeded with an answer that cites the code
    assert ended["status"] == "SUCCEEDED", ended
    envelope = json.loads(ended["output"])["envelope"]
    # and, once Step Functions reports the end to the status function, the mission shows it
    _invoke(
        session,
        deployment.function_named("missions-status"),
        {
            "detail-type": "Step Functions Execution Status Change",
            "source": "aws.states",
            "detail": {"executionArn": execution_arn, "status": "SUCCEEDED", "name": created["mission_id"]},
        },
    )
    status, shown = _api(session, deployment, "GET", f"/missions/{created['mission_id']}")
    assert shown["status"] in {"completed", "succeeded"}, shown
    result = shown.get("result") or envelope
    assert "offload" in json.dumps(result).lower()


def _reported(session, deployment, mission_id: str, execution_arn: str, status: str) -> None:
    """What the status function's rule delivers in AWS when an execution ends (moto's bus does not)."""
    event = {
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "detail": {"executionArn": execution_arn, "status": status, "name": mission_id},
    }
    _invoke(session, deployment.function_named("missions-status"), event)


def _answer(session, deployment, mission_id: str, question: dict, body: dict) -> None:
    path = f"/missions/{mission_id}/interrupts/{question['interrupt_id']}"
    status, answered = _api(session, deployment, "POST", path, body)
    assert status == 200, answered


def test_a_trips_dinners_are_a_dining_sub_mission_started_and_answered_by_the_deployed_functions(deployed):
    deployment, session = deployed
    # Given a trip started through the deployed API
    trip = {"capability": "travel", "goal": "Plan a 4-day Rome trip for May 2026, 2 travelers"}
    status, created = _api(session, deployment, "POST", "/missions", trip)
    assert status == 202, created
    parent, children_ended = created["mission_id"], []
    deadline = time.monotonic() + 180
    # When its choices are answered with the first option, and each sub-mission's end is reported to the
    # status function as Step Functions' rule would, until the trip asks for its review
    while True:
        assert time.monotonic() < deadline, "the trip never asked for its review"
        status, shown = _api(session, deployment, "GET", f"/missions/{parent}")
        assert status == 200 and shown["status"] not in ("failed", "completed", "cancelled"), json.dumps(shown)[:3000]
        question = shown["pending_interrupt"]
        if question and question["kind"] == "choice":
            _answer(session, deployment, parent, question, {"decision": question["options"][0]})
        elif question:
            break
        for child in (c for c in shown["children"] if c not in children_ended):
            child_arn = _execution_of(session, deployment, child)
            ended = _wait_for_end(session, child_arn)
            assert ended["status"] == "SUCCEEDED", ended
            _reported(session, deployment, child, child_arn, "SUCCEEDED")
            children_ended.append(child)
        time.sleep(0.1)
    # Then the dinners stage had started one dining mission of the same user (through the interrupt function),
    # whose end resumed the trip (through the status function): the trip drafted, and asks for its review
    assert question["kind"] == "agent_review", question
    (child,) = children_ended
    status, sub = _api(session, deployment, "GET", f"/missions/{child}")
    assert status == 200 and sub["capability"] == "dining" and sub["status"] == "completed", sub
    assert sub["parent"]["mission_id"] == parent
    # When the traveler approves
    _answer(session, deployment, parent, question, {"approved": True, "decision": "approve"})
    parent_arn = _execution_of(session, deployment, parent)
    ended = _wait_for_end(session, parent_arn)
    assert ended["status"] == "SUCCEEDED", ended
    _reported(session, deployment, parent, parent_arn, "SUCCEEDED")
    # Then the trip completed with the sub-mission's dinners in its itinerary
    done = _api(session, deployment, "GET", f"/missions/{parent}")[1]
    assert done["status"] == "completed" and done["children"] == [child], done
    assert "Dinner: " in json.dumps(json.loads(ended["output"])["envelope"])


def test_health_and_readiness_answer_without_a_token_from_the_deployed_api(deployed):
    deployment, session = deployed
    # When an uptime check with no token asks the deployed api function
    assert _api(session, deployment, "GET", "/health", user=None) == (200, {"status": "ok"})
    status, ready = _api(session, deployment, "GET", "/ready", user=None)
    # Then every table of the stack and its bus answered the api's role (checked below by the role test)
    assert status == 200 and ready["ready"] is True, ready
    tables = {name for name in ready["checks"] if name.startswith("table:")}
    assert len(tables) >= 12 and ready["checks"]["bus"]["ok"], ready


def test_the_deploy_stored_version_one_of_every_agent_before_any_mission_ran(deployed):
    deployment, session = deployed
    installed = [registry.load(name) for name in registry.installed()]
    # Given the stack as CloudFormation created it (its custom resource asked the deploy function)
    table = deployment.runtimes[deployment.function_named("missions-api")].settings.agents_table
    items = []
    for page in session.client("dynamodb").get_paginator("scan").paginate(TableName=table):
        items += page["Items"]
    # Then every agent of every capability has version 1 stored, as its capability.toml shipped it
    versions = {
        (item["capability"]["S"], item["sk"]["S"].split("#")[1]): json.loads(item["body"]["S"])
        for item in items
        if item["sk"]["S"].startswith("version#") and int(item["sk"]["S"].rsplit("#", 1)[1]) == 1
    }
    assert set(versions) == {(c.name, agent.name) for c in installed for agent in c.pipeline.agents}
    fitness = registry.load("fitness_coach")
    assert versions[("fitness_coach", "assess")]["prompt"] == fitness.prompts["assess"]
    assert {v["source"] for v in versions.values()} == {"capability.toml"}
    # And the stack's output says what the deploy stored
    assert "fitness_coach: " in deployment.outputs["AgentConfigurations"]
    assert f"{len(fitness.pipeline.agents)} seeded" in deployment.outputs["AgentConfigurations"]


def test_a_prompt_promoted_over_the_deployed_api_changes_the_next_mission_and_a_rollback_restores_it(deployed):
    deployment, session = deployed
    ops = {"sub": "ops", "cognito:groups": "[operators]"}  # the user pool's operators group, as its JWT says
    assess = "/agents/fitness_coach/assess"
    goal = {"capability": "fitness_coach", "goal": "I'm a beginner with dumbbells at home: help me get stronger."}

    coach = "coach"  # a user of this test's own: the missions it leaves waiting are nobody else's

    def mission() -> str:
        status, accepted = _api(session, deployment, "POST", "/missions", goal, user=coach)
        assert status == 202, accepted
        _asked(session, deployment, accepted["mission_id"], coach)
        return str(accepted["mission_id"])

    shipped = registry.load("fitness_coach").prompts["assess"]
    # Given a mission on the shipped configuration
    before = mission()
    # When an operator creates and promotes a new assess prompt through the deployed API (no redeploy)
    status, created = _api(
        session, deployment, "POST", f"{assess}/versions", {"prompt": "Intake v2 for {{capability}}."}, claims=ops
    )
    assert status == 201, created
    status, state = _api(session, deployment, "POST", f"{assess}/promote", {"version": created["version"]}, claims=ops)
    assert status == 200 and state["active"] == created["version"], state
    # Then the next mission's assess stage (its own deployed function) sends the new prompt
    after = mission()
    assert PROMPTS.prompts[(after, "assess")] == ["Intake v2 for fitness_coach."]
    assert PROMPTS.prompts[(before, "assess")] == [shipped]
    # When the operator rolls back / Then the mission after that sends the shipped prompt again
    status, state = _api(session, deployment, "POST", f"{assess}/rollback", claims=ops)
    assert status == 200 and state["active"] == 1, state
    later = mission()
    assert PROMPTS.prompts[(later, "assess")] == [shipped]
    # and each mission's events name the version it pinned
    versions = []
    for mission_id in (before, after, later):
        status, timeline = _api(session, deployment, "GET", f"/missions/{mission_id}/events", user=coach)
        started = [e for e in timeline["events"] if e["type"] == "agent_started" and e["stage"] == "assess"]
        versions.append(started[0]["payload"]["config_version"])
    assert versions == [1, created["version"], 1]


def test_a_chat_turn_runs_through_the_deployed_stream_function_with_its_role(deployed):
    deployment, session = deployed
    # When a user asks through the chat API of the deployed stream function (its own role and environment)
    body = {
        "model": "code_analysis",
        "messages": [{"role": "user", "content": GOAL}],
        "context": {"repo": str(ROOT)},
        "wait_seconds": 200,
    }
    event = http_event(
        "POST", "/v1/chat/completions", "", {"content-type": "application/json"}, json.dumps(body).encode(), "cy"
    )
    response = _invoke(session, deployment.function_named("missions-stream"), event)
    # Then the reply is the mission's answer in OpenAI's shape, and its conversation holds the turn
    assert response["statusCode"] == 200, response
    reply = json.loads(response["body"])
    assert reply["object"] == "chat.completion" and reply["mission_status"] == "completed", reply
    assert "offload" in reply["choices"][0]["message"]["content"].lower()
    status, conversation = _api(session, deployment, "GET", f"/conversations/{reply['conversation_id']}", user="cy")
    assert status == 200 and conversation["turns"][0]["mission_id"] == reply["mission_id"]


def test_a_repository_registered_by_git_url_is_analyzed_on_the_deployed_stack(deployed, tmp_path):
    deployment, session = deployed
    # Given this project served by a git server on loopback
    with serve_git(ROOT) as url:
        # When ada registers it through the deployed API (the bus rule hands the import to its function)
        status, registered = _api(session, deployment, "POST", "/repositories", {"url": url, "name": "missions"})
        assert status == 202, registered
        status, record = _api(session, deployment, "GET", f"/repositories/{registered['repository_id']}")
    # Then an immutable snapshot is in the snapshot bucket under ada's prefix
    assert record["status"] == "ready", record
    snapshot = record["snapshots"][-1]
    bucket = deployment.functions[deployment.function_named("missions-api")]["Environment"]["Variables"][
        "MISSIONS_SNAPSHOT_BUCKET"
    ]
    key = snapshot_key("ada", record["repository_id"], snapshot["sha256"])
    assert session.client("s3").head_object(Bucket=bucket, Key=key)["ContentLength"] == snapshot["archive_bytes"]
    # When ada asks about it
    status, created = _api(
        session,
        deployment,
        "POST",
        "/missions",
        {"capability": "code_analysis", "goal": GOAL, "context": {"repository": record["repository_id"]}},
    )
    assert status == 202, created
    ended = _wait_for_end(session, _execution_of(session, deployment, created["mission_id"]))
    assert ended["status"] == "SUCCEEDED", ended
    # Then the answer cites real lines of the snapshot the stages unpacked
    envelope = json.loads(ended["output"])["envelope"]
    citations = envelope["outputs"]["integration"]["citations"]
    assert citations
    archive, unpacked = tmp_path / "s.tar.gz", tmp_path / "s"
    session.client("s3").download_file(bucket, key, str(archive))
    extract_snapshot(archive, unpacked)
    for ref in citations:
        file, line = ref.rsplit(":", 1)[0], int(ref.rsplit(":", 1)[1].split("-")[0])
        assert 1 <= line <= len((unpacked / file).read_text().splitlines()), ref
    # and another user cannot see it, or start a mission on it
    assert _api(session, deployment, "GET", f"/repositories/{record['repository_id']}", user="eve")[0] == 404
    status, refused = _api(
        session,
        deployment,
        "POST",
        "/missions",
        {"capability": "code_analysis", "goal": GOAL, "context": {"repository": record["repository_id"]}},
        user="eve",
    )
    assert status == 422, refused


def test_an_uploaded_archive_is_imported_through_its_presigned_url_on_the_deployed_stack(deployed):
    import requests  # moto intercepts requests to S3, as it does boto3's

    deployment, session = deployed
    archive = tar_gz_bytes(
        {"ledger-main/ledger.py": b"class Ledger:\n    def post(self, amount):\n        return amount\n"}
    )
    # Given ada registers an upload through the deployed API
    status, registered = _api(
        session, deployment, "POST", "/repositories", {"upload": {"format": "tar.gz", "size_bytes": len(archive)}}
    )
    assert status == 201 and registered["status"] == "awaiting_upload", registered
    # When she PUTs the archive to the presigned URL and asks for the import
    put = requests.put(registered["upload"]["url"], data=archive, timeout=30)
    assert put.status_code == 200, put.text
    status, importing = _api(session, deployment, "POST", f"/repositories/{registered['repository_id']}/imports", {})
    assert status == 202, importing
    # Then the import function made a snapshot of it
    status, record = _api(session, deployment, "GET", f"/repositories/{registered['repository_id']}")
    assert record["status"] == "ready" and record["snapshots"][0]["files"] == 1, record


def test_a_signed_webhook_starts_a_mission_through_the_bus_rule(deployed):
    deployment, session = deployed
    # Given the webhook source's secret, created as an operator would, under the deployed prefix
    prefix = deployment.functions[deployment.function_named("missions-webhook")]["Environment"]["Variables"][
        "MISSIONS_WEBHOOK_SECRETS_PREFIX"
    ]
    session.client("secretsmanager").create_secret(
        Name=f"{prefix}/git", SecretString=json.dumps({"secret": "whsec_czNjcmV0", "user_id": "grace"})
    )
    body = json.dumps({"type": "push", "symbol": "EnvelopeCodec"}).encode()
    timestamp = str(int(time.time()))
    headers = {
        "content-type": "application/json",
        "webhook-id": "d-1",
        "webhook-timestamp": timestamp,
        "webhook-signature": sign("whsec_czNjcmV0", "d-1", timestamp, body),
    }
    # When the CI system posts it (no JWT: webhooks carry a Standard Webhooks signature)
    event = http_event("POST", "/webhooks/git", "", headers, body, None)
    response = _invoke(session, deployment.function_named("missions-webhook"), event)
    # Then it was accepted, and the bus rule's target started grace's mission
    assert response["statusCode"] in (200, 202), response
    status, listed = _api(session, deployment, "GET", "/missions", user="grace")
    assert status == 200 and listed["missions"], listed
    assert "EnvelopeCodec" in listed["missions"][0]["goal"]
    # Given a source whose secret is in an old format (a bare key, not {"secret": "whsec_...", ...})
    session.client("secretsmanager").create_secret(Name=f"{prefix}/legacy", SecretString="s3cret-of-old")
    headers = {**headers, "webhook-id": "d-2", "webhook-signature": sign("whsec_czNjcmV0", "d-2", timestamp, body)}
    response = _invoke(
        session,
        deployment.function_named("missions-webhook"),
        http_event("POST", "/webhooks/legacy", "", headers, body, None),
    )
    # Then the deployed function answers 503 naming the format the secret must have, not a 500
    assert response["statusCode"] == 503, response
    reason = json.loads(response["body"])["message"]
    assert "webhook source 'legacy' is misconfigured" in reason and '{"secret": "whsec_<base64>"' in reason


def test_the_docs_walkthrough_from_make_deploy_to_a_first_mission_runs_on_the_stack(deployed, tmp_path):
    """`missions ... --env dev` as docs/deploying.md writes it: the endpoints from the stack's outputs in moto's
    CloudFormation, the deployed api function behind the played authorizer, the deployed state machines."""
    from typer.testing import CliRunner

    from missions.cli import Wiring, app
    from tests.support.cognito import PlayedCognito
    from tests.support.gateway import DeployedApi

    deployment, session = deployed
    people, machines = _walkthrough()
    assert people[0] == "make deploy ENV=dev"  # what the `deployed` fixture did, in moto
    sign_in = next(v for k, v in deployment.outputs.items() if k.startswith("ApiSignInUrl"))
    callback = re.search(r"redirect_uri=([^&]+)", sign_in).group(1).replace("%3A", ":").replace("%2F", "/")
    # moto creates no Cognito client: the stack's output names the people's client "None", as Ref of it renders
    cognito = PlayedCognito(user_client="None", callback_urls=(callback,), person="ada")
    gateway = DeployedApi(session, deployment, cognito)
    wiring = Wiring(transport=gateway, open_browser=cognito.browser)
    shop = tmp_path / "shop"
    (shop / "billing").mkdir(parents=True)
    (shop / "billing" / "tax.py").write_text("def compute_tax(amount, rate=0.2):\n    return amount * rate\n")
    (shop / "app.py").write_text("from billing.tax import compute_tax\n")
    values = {"~/src/shop": str(shop), "<machine client>": cognito.machine_client, "$SECRET": cognito.machine_secret}
    clean = {"MISSIONS_CONFIG_DIR": str(tmp_path / "config"), "MISSIONS_TOKEN": None, "MISSIONS_API_URL": None}

    def missions(line: str, expect: int = 0) -> str:
        for placeholder, value in values.items():
            line = line.replace(placeholder, value)
        words = shlex.split(line)
        assert words[0] == ".venv/bin/missions" and "<" not in line, line
        result = CliRunner().invoke(app, words[1:], obj=wiring, env=clean)
        assert result.exit_code == expect, (line, result.output)
        # the deployed functions run in this process, and print their logs and metrics (one JSON line each,
        # for CloudWatch in AWS) on the same stdout: they are not the CLI's
        text = result.stdout if expect in (0, 3) else result.stderr  # 3: it waits, and says so on stdout
        return "".join(line for line in text.splitlines(keepends=True) if not line.startswith(('{"_aws"', '{"level"')))

    def waiting_mission() -> tuple[str, str]:
        """A mission of the signed-in user that waits for an answer (with --json, the CLI prints how to answer
        it and exits 3 when it cannot ask)."""
        document = missions(
            f'.venv/bin/missions run code_analysis "help" --env dev --repository {values["<repository id>"]} --json', 3
        )
        found = re.search(r"missions answer (m_\w+) (\w+)", json.loads(document)["answer_with"])
        assert found, document
        return found.group(1), found.group(2)

    # a person: signs in on the hosted page (PKCE), registers a repository, runs a mission on it
    assert "authorization code" in missions(people[1])
    added = missions(people[2])
    values["<repository id>"] = added.split()[0]
    assert values["<repository id>"].startswith("r_") and "ready" in added, added
    ran = missions(people[3])
    assert "completed" in ran and "billing/tax.py:1" in ran, ran
    first = re.search(r"mission (m_\w+)", ran).group(1)
    assert first in missions(people[4])  # list
    # a mission that waits: status shows its question, answer resumes it, it completes
    values["<mission id>"], values["<interrupt id>"] = waiting_mission()
    assert f"missions answer {values['<mission id>']} {values['<interrupt id>']}" in missions(people[5])
    assert f"answered {values['<interrupt id>']}" in missions(people[6])
    deadline = time.monotonic() + 60
    while (
        json.loads(missions(f".venv/bin/missions status {values['<mission id>']} --env dev --json"))["status"]
        != "completed"
    ):
        assert time.monotonic() < deadline, "the answered mission did not complete"
        time.sleep(0.2)
    # another that waits is cancelled
    values["<mission id>"], _ = waiting_mission()
    assert f"cancelled {values['<mission id>']}" in missions(people[7])
    ada = {m["status"] for m in json.loads(missions(".venv/bin/missions list --env dev --json"))["missions"]}
    assert ada == {"completed", "cancelled"}
    # a machine: client credentials, its own repository, a mission answered from --answer
    assert "client credentials" in missions(machines[0])
    values["<repository id>"] = missions(machines[1]).split()[0]
    outcome = json.loads(missions(machines[2]))
    assert outcome["status"] == "completed" and outcome["stages"].count("intent") == 2, outcome
    listed = json.loads(missions(".venv/bin/missions list --env dev --json"))["missions"]
    assert [m["mission_id"] for m in listed] == [outcome["mission_id"]]  # the machine's only: its sub is its client id
    # and every call went through the authorizer with a token it issued
    assert gateway.calls and all(status != 401 for _, _, status in gateway.calls)


def test_a_users_schedule_is_an_eventbridge_scheduler_schedule_that_starts_their_mission(deployed):
    deployment, session = deployed
    api = deployment.functions[deployment.function_named("missions-api")]["Environment"]["Variables"]
    schedule_function = deployment.functions[deployment.function_named("missions-schedule")]
    scheduler = session.client("scheduler")
    goal = "Weekly check-in: help me keep getting stronger at home"
    # Given lin creates a schedule through the deployed API
    body = {
        "expression": "cron(0 8 ? * MON *)",
        "timezone": "Europe/Paris",
        "goal": goal,
        "capability": "fitness_coach",
    }
    status, created = _api(session, deployment, "POST", "/schedules", body, user="lin")
    assert status == 201, created
    # Then it is a Scheduler schedule in the users' group, firing the schedule function as the scheduler's role
    entry = scheduler.get_schedule(Name=created["schedule_id"], GroupName=api["MISSIONS_SCHEDULE_GROUP"])
    assert (entry["ScheduleExpression"], entry["ScheduleExpressionTimezone"], entry["State"]) == (
        "cron(0 8 ? * MON *)",
        "Europe/Paris",
        "ENABLED",
    )
    assert entry["Target"]["Arn"] == schedule_function["FunctionArn"]
    assert entry["Target"]["RoleArn"] == api["MISSIONS_SCHEDULER_ROLE_ARN"]
    trust = session.client("iam").get_role(RoleName=entry["Target"]["RoleArn"].rsplit("/", 1)[1])["Role"]
    assert "scheduler.amazonaws.com" in json.dumps(trust["AssumeRolePolicyDocument"])
    # When the Scheduler fires it (moto's never does: the target gets the input, as the Scheduler sends it)
    fired = entry["Target"]["Input"].replace("<aws.scheduler.scheduled-time>", "2026-11-30T07:00:00Z")
    _invoke(session, schedule_function["FunctionName"], json.loads(fired))
    # Then lin's mission started, and a redelivery of the same firing starts no second one
    _invoke(session, schedule_function["FunctionName"], json.loads(fired))
    status, listed = _api(session, deployment, "GET", "/missions", user="lin")
    assert status == 200 and [m["goal"] for m in listed["missions"]] == [goal], listed
    # When lin pauses it / Then the Scheduler schedule is disabled; deleted / Then it is gone from the Scheduler
    status, paused = _api(session, deployment, "POST", f"/schedules/{created['schedule_id']}/pause", user="lin")
    assert status == 200 and paused["state"] == "paused", paused
    entry = scheduler.get_schedule(Name=created["schedule_id"], GroupName=api["MISSIONS_SCHEDULE_GROUP"])
    assert entry["State"] == "DISABLED"
    status, _ = _api(session, deployment, "DELETE", f"/schedules/{created['schedule_id']}", user="lin")
    assert status == 204
    names = [s["Name"] for s in scheduler.list_schedules(GroupName=api["MISSIONS_SCHEDULE_GROUP"])["Schedules"]]
    assert created["schedule_id"] not in names


def test_a_users_daily_budget_stops_their_running_mission_and_holds_the_next_on_the_deployed_stack(deployed):
    # Given dev's offline model priced as a small model, and an operator who gives bea less than one call's worth
    deployment, session = deployed
    ops = {"sub": "ops", "cognito:groups": "[operators]"}
    status, day = _api(session, deployment, "PUT", "/users/bea/budget", {"daily_budget_usd": 1e-7}, "ops", ops)
    assert status == 200 and day["reached"] is False, day
    # When bea starts a mission, its first paid call reaches the budget
    goal = {"capability": "code_analysis", "goal": GOAL, "context": {"repo": str(ROOT)}}
    status, created = _api(session, deployment, "POST", "/missions", goal, user="bea")
    assert status == 202 and created["status"] == "started", created
    execution_arn = _execution_of(session, deployment, created["mission_id"])
    ended = _wait_for_end(session, execution_arn)
    _reported(session, deployment, created["mission_id"], execution_arn, ended["status"])
    # Then the mission ended through its final stage with the reason, having run no further
    envelope = json.loads(ended["output"])["envelope"]
    assert ended["status"] == "SUCCEEDED" and envelope["terminal_reason"] == "user_budget", envelope
    status, shown = _api(session, deployment, "GET", f"/missions/{created['mission_id']}", user="bea")
    assert (shown["status"], shown["terminal_reason"]) == ("completed", "user_budget"), shown
    # and her next mission is held, as GET /me says why
    status, me = _api(session, deployment, "GET", "/me", user="bea")
    assert me["budget"]["reached"] is True and me["budget"]["spent_usd"] > 0, me
    status, held = _api(session, deployment, "POST", "/missions", goal, user="bea")
    assert (status, held["status"], held["held"]) == (202, "queued", "budget"), held
    # When the operator raises it, the deployed API starts it
    status, day = _api(session, deployment, "PUT", "/users/bea/budget", {"daily_budget_usd": 5}, "ops", ops)
    assert status == 200 and day["started"] == [held["mission_id"]], day
    _wait_for_end(session, _execution_of(session, deployment, held["mission_id"]))


def test_a_conversations_second_mission_waits_for_the_first_and_the_status_function_hands_it_over(deployed):
    # Given a conversation's first mission started through the deployed API
    deployment, session = deployed
    goal = {"capability": "code_analysis", "goal": GOAL, "context": {"repo": str(ROOT)}, "conversation_id": "c-dt"}
    status, first = _api(session, deployment, "POST", "/missions", goal, user="dot")
    assert status == 202 and first["status"] == "started", first
    # When a second of the same conversation arrives while the first has not ended (its end is reported below)
    status, second = _api(
        session, deployment, "POST", "/missions", {**goal, "goal": "And where is the codec used?"}, "dot"
    )
    assert (status, second["status"], second["held"]) == (202, "queued", "key"), second
    # Then once the first's execution ends and Step Functions reports it, the status function starts the second
    arn = _execution_of(session, deployment, first["mission_id"])
    _reported(session, deployment, first["mission_id"], arn, _wait_for_end(session, arn)["status"])
    ended = _wait_for_end(session, _execution_of(session, deployment, second["mission_id"]))
    assert ended["status"] == "SUCCEEDED", ended
    # and it started from the conversation as the first left it
    envelope = json.loads(ended["output"])["envelope"]
    remembered = envelope["context"]["conversation"]["turns"]
    assert [turn["goal"] for turn in remembered] == [GOAL], remembered


def test_a_burst_of_profile_edits_is_debounced_into_one_replan_by_the_deployed_trigger_and_schedule_functions(deployed):
    from datetime import UTC, datetime, timedelta

    from missions.core.memory.longterm import MemoryChange
    from missions.core.triggers.specs import memory_change_event
    from tests.support.triggers import lambda_event

    deployment, session = deployed
    trigger = deployment.function_named("missions-trigger")
    # Given three quick changes of fay's fitness goal, as the bus rule delivers them to the trigger function
    for n, goal in enumerate(("run 5k", "run 10k", "swim 1k")):
        change = MemoryChange(
            user_id="fay", namespace=["fitness_profile"], key="profile", kind="updated",
            old={"goal": "walk"}, new={"goal": goal}, record_id=f"r-{n}",
        )  # fmt: skip
        _invoke(session, trigger, lambda_event(memory_change_event(change)))
    # Then each was debounced, and one one-time schedule in the users' group invokes the schedule function
    status, listed = _api(session, deployment, "GET", "/triggers/fitness_coach.goal-changed/decisions", user="fay")
    assert status == 200 and [d["decision"] for d in listed["decisions"]] == ["debounced"] * 3, listed
    scheduler = session.client("scheduler")
    group = deployment.functions[trigger]["Environment"]["Variables"]["MISSIONS_SCHEDULE_GROUP"]
    [timer] = [s for s in scheduler.list_schedules(GroupName=group)["Schedules"] if s["Name"].startswith("flow-")]
    held = scheduler.get_schedule(GroupName=group, Name=timer["Name"])
    assert held["ScheduleExpression"].startswith("at(") and held["ActionAfterCompletion"] == "DELETE"
    assert held["Target"]["Arn"].endswith(":function:missions-dev-schedule")
    schedule = deployment.function_named("missions-schedule")
    # When the Scheduler fires it a minute on (the schedule function's clock moved on, as time would)
    later = datetime.now(UTC) + timedelta(seconds=90)
    deployment.runtimes[schedule].now = lambda: later
    fired = _invoke(session, schedule, json.loads(held["Target"]["Input"]))
    # Then one replanning mission started, with the last goal
    [mission] = fired["started"] + fired["queued"]
    status, shown = _api(session, deployment, "GET", f"/missions/{mission}", user="fay")
    assert status == 200 and shown["goal"].startswith("My new fitness goal: swim 1k"), shown
    assert shown["trigger"] == "memory"


def test_an_mcp_client_configured_by_the_cli_runs_a_mission_through_the_deployed_api(deployed, tmp_path):
    """`missions mcp --env dev` (a machine's client credentials), then the official MCP client through the deployed
    API: the played JWT authorizer, the deployed api function with its role, the deployed state machine."""
    from pydantic import AnyUrl
    from typer.testing import CliRunner

    from missions.cli import Wiring, app
    from tests.support.cognito import PlayedCognito
    from tests.support.gateway import DeployedApi
    from tests.support.mcp_session import call, run_scenario

    deployment, session = deployed
    cognito = PlayedCognito()
    gateway = DeployedApi(session, deployment, cognito)
    secrets = {"MISSIONS_CLIENT_ID": cognito.machine_client, "MISSIONS_CLIENT_SECRET": cognito.machine_secret}
    env = {"MISSIONS_CONFIG_DIR": str(tmp_path), "MISSIONS_TOKEN": None, "MISSIONS_API_URL": None, **secrets}
    printed = CliRunner().invoke(app, ["mcp", "--env", "dev"], obj=Wiring(transport=gateway), env=env)
    assert printed.exit_code == 0, printed.output
    # the deployed functions run in this process and print their logs (one JSON line each) on the same stdout
    own = "".join(
        line for line in printed.stdout.splitlines(keepends=True) if not line.startswith(('{"_aws', '{"level'))
    )
    entry = json.loads(own)["mcpServers"]["missions"]
    assert entry["url"] == gateway_url(deployment) + "/mcp"

    async def ask(client):
        context = {"repo": str(ROOT)}
        return await call(client, "start_mission", {"goal": "help", "capability": "code_analysis", "context": context})

    # When the client starts a mission whose goal is too vague to act on
    asked = run_scenario(entry, ask, through=gateway)
    mission_id, question = asked["mission_id"], asked["pending_interrupts"][0]
    assert asked["status"] == "interrupted" and question["kind"] == "clarification", asked

    async def answer(client):
        ids = {"mission_id": mission_id, "interrupt_id": question["interrupt_id"]}
        return await call(client, "answer_question", {**ids, "text": GOAL, "wait_seconds": 0})

    # and answers its question through MCP
    answered = run_scenario(entry, answer, through=gateway)
    assert answered["answer"]["status"] == "answered", answered
    execution_arn = _execution_of(session, deployment, mission_id)
    assert _wait_for_end(session, execution_arn)["status"] == "SUCCEEDED"
    _reported(session, deployment, mission_id, execution_arn, "SUCCEEDED")

    async def read(client):
        return json.loads((await client.read_resource(AnyUrl(f"mission://{mission_id}/result"))).contents[0].text)

    # Then its result is read through MCP too: the answer cites the code
    result = run_scenario(entry, read, through=gateway)
    assert result["status"] == "completed" and "offload" in json.dumps(result["result"]).lower(), result
    # and every call went through the API's /mcp route (the authorizer passed each)
    assert {(method, path) for method, path, _ in gateway.calls} >= {("POST", "/mcp")}
    assert {status for method, path, status in gateway.calls if path == "/mcp"} <= {200, 202}


def gateway_url(deployment) -> str:
    return next(v for k, v in deployment.outputs.items() if k.startswith("ApiUrl")).rstrip("/")


def test_every_roles_inline_policies_fit_iams_limit(deployed):
    # IAM refuses a role whose inline policies, together and without whitespace, pass 10,240 characters (moto
    # does not): measured on the deployed documents, every ARN resolved
    deployment, session = deployed
    iam = session.client("iam")
    sizes = {}
    for page in iam.get_paginator("list_roles").paginate():
        for role in page["Roles"]:
            documents = [
                iam.get_role_policy(RoleName=role["RoleName"], PolicyName=name)["PolicyDocument"]
                for name in iam.list_role_policies(RoleName=role["RoleName"])["PolicyNames"]
            ]
            sizes[role["RoleName"]] = sum(
                len(json.dumps(json.loads(d) if isinstance(d, str) else d, separators=(",", ":"))) for d in documents
            )
    api_role = deployment.functions[deployment.function_named("missions-api")]["Role"].rsplit("/", 1)[1]
    assert sizes[api_role] > 0
    assert {name: size for name, size in sizes.items() if size > 10_240} == {}


def test_the_housekeeping_functions_run_with_their_deployed_roles(deployed):
    deployment, session = deployed
    assert _invoke(session, deployment.function_named("missions-sla"), {})["overdue"] == 0
    assert _invoke(session, deployment.function_named("missions-retention"), {})["failures"] == {}


def test_every_call_a_function_made_is_allowed_by_its_own_role(deployed):
    # (runs after the missions above: it checks the calls they made)
    deployment, session = deployed
    by_function = deployment.calls_by_function()
    exercised = {deployment.functions[f]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] for f in by_function}
    assert {
        "missions-api",
        "missions-stage",
        "missions-status",
        "missions-webhook",
        "missions-trigger",
        "missions-sla",
        "missions-retention",
        "missions-repository-import",
    } <= exercised, exercised
    denied = []
    for function, calls in by_function.items():
        statements = role_statements(session, deployment.functions[function]["Role"])
        for call in calls:
            denied += [(function, need) for need in needs(call) if not allowed(need, statements)]
    assert not denied, "\n".join(f"{f}: {n.action} on {n.resource}" for f, n in denied)


def test_a_role_denies_what_the_access_table_does_not_grant(deployed):
    # Given the SLA function's role (it may only count the questions waiting on the interrupts' index)
    deployment, session = deployed
    statements = role_statements(session, deployment.functions[deployment.function_named("missions-sla")]["Role"])
    tables = {c["Environment"]["Variables"]["MISSIONS_CHECKPOINTS_TABLE"] for c in deployment.functions.values()}
    # Then reading checkpoints or starting executions is not allowed (the checker really checks)
    assert not allowed(Need("dynamodb:GetItem", table_arn(tables.pop())), statements)
    assert not allowed(Need("states:StartExecution", next(iter(deployment.state_machines.values()))), statements)
