"""The examples of the reference pages (docs/*.md), run as written: the HTTP API block with curl against a
dev server, and the CLI blocks with the `missions` command (on the emulation, and on the dev server).

Only what a reader fills in is replaced: the port (localhost:8787 -> the test server's), the
placeholders (`<repository id>`, `<mission id>`, `<interrupt id>`, `<cursor>`, each from an
earlier response), `~/src/shop` (a small repository made here) and the GitHub URL (no network
here: a git server on loopback), and in the chat's examples what a user types at the prompt is given on
stdin (not a terminal in a test: the chat reads its lines). The deployed walkthrough (`--env dev`) is run by
tests/infra/test_deploy_smoke.py against the stack deployed into moto.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.e2e.test_dev_server import Client, wait_for
from tests.support.archives import tar_gz_bytes
from tests.support.docs import fenced, sh_blocks
from tests.support.git_server import serve_git

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
MISSIONS = str(Path(sys.executable).parent / "missions")
TAX = b'"""Taxes."""\n\n\ndef compute_tax(amount, rate=0.2):\n    return round(amount * rate, 2)\n'
CHECKOUT = b"from billing.tax import compute_tax\n\n\ndef checkout(total):\n    return total + compute_tax(total)\n"


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~/src/shop: a git repository with a `main` branch."""
    from dulwich import porcelain

    root = tmp_path_factory.mktemp("src") / "shop"
    (root / "billing").mkdir(parents=True)
    (root / "billing" / "tax.py").write_bytes(TAX)
    (root / "checkout.py").write_bytes(CHECKOUT)
    repo = porcelain.init(str(root))
    porcelain.add(repo, [str(root / "billing" / "tax.py"), str(root / "checkout.py")])
    commit = porcelain.commit(repo, message=b"shop", author=b"A <a@example.org>", committer=b"A <a@example.org>")
    repo.refs[b"refs/heads/main"] = commit
    repo.refs.set_symbolic_ref(b"HEAD", b"refs/heads/main")
    return root


@pytest.fixture(scope="module")
def server(shop: Path):
    cloud = LocalCloud(settings={"repo_roots": [str(shop)]})  # every capability, as `missions dev` serves them
    with cloud, DevServer(cloud, port=0) as dev:
        yield dev


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AWS_", "MISSIONS_"))}
    return {**env, "USER": "alice", **extra}


def register_upload(client: Client, files: dict[str, bytes]) -> str:
    archive = tar_gz_bytes(files)
    status, record = client.call("POST", "/repositories", {"upload": {"format": "tar.gz", "size_bytes": len(archive)}})
    assert status == 201, record
    put = urllib.request.Request(record["upload"]["url"], data=archive, method="PUT")
    with urllib.request.urlopen(put, timeout=30) as response:
        assert response.status == 200
    status, _ = client.call("POST", f"/repositories/{record['repository_id']}/imports", {})
    assert status == 202
    deadline = time.monotonic() + 60
    while client.call("GET", f"/repositories/{record['repository_id']}")[1]["status"] != "ready":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    return str(record["repository_id"])


# -- docs/api.md, "The HTTP API locally" ---------------------------------------------------------------------


def test_the_http_api_block_runs_as_written(server: DevServer, shop: Path, tmp_path: Path):
    (block,) = sh_blocks("docs/api.md", "## The HTTP API locally")
    setup, commands = block[0], block[1:]
    assert setup.startswith("H='Authorization: Bearer dev:alice'") and len(commands) == 16, block
    alice = Client(server, "alice")
    # <repository id>: a repository alice registered (the next section shows how)
    values = {"<repository id>": register_upload(alice, {"shop-main/billing/tax.py": TAX})}
    answers: list[tuple[str, Any]] = []

    def curl(command: str) -> Any:
        for placeholder, value in values.items():
            command = command.replace(placeholder, value)
        assert "<" not in command, command
        command = command.replace("localhost:8787", server.url.removeprefix("http://"))
        result = subprocess.run(
            ["bash", "-c", f"{setup}; {command} -w '\\n%{{http_code}}'"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        body, _, status = result.stdout.rpartition("\n")
        assert result.returncode == 0 and status.startswith("2"), (command, status, body, result.stderr)
        answer = json.loads(body) if body.strip() else None
        answers.append((command, answer))
        return answer

    started: list[dict[str, Any]] = []
    for command in commands:
        if "/feedback" in command:  # rated once it ended
            wait_for(alice, values["<mission id>"], {"completed", "failed"})
        if command.endswith("/missions/<mission id>"):  # GET the mission until it waits for an answer
            deadline = time.monotonic() + 60
            while (answer := curl(command))["status"] != "interrupted":
                assert time.monotonic() < deadline, answer
                time.sleep(0.1)
            values["<interrupt id>"] = answer["pending_interrupt"]["interrupt_id"]
            continue
        answer = curl(command)
        if "-X POST localhost:8787/missions -d" in command:
            started.append(answer)
            values["<mission id>"] = answer["mission_id"]  # the latest mission started: the vague one
        if "/events" in command:
            values["<cursor>"] = answer["cursor"]
    # Then both missions started, the vague one asked, was answered, ended and was rated, the list has both
    assert [s["status"] for s in started] == ["started", "started"], started
    assert next(a for c, a in answers if "/interrupts/" in c)["status"] == "answered"
    assert next(a for c, a in answers if "/feedback" in c)["mission_id"] == values["<mission id>"]
    listed = next(a for c, a in answers if c.endswith("/missions"))["missions"]
    assert {s["mission_id"] for s in started} <= {m["mission_id"] for m in listed}
    assert next(a for c, a in answers if c.endswith("openapi.json"))["openapi"].startswith("3.")
    assert next(a for c, a in answers if c.endswith("/health")) == {"status": "ok"}
    ready = next(a for c, a in answers if c.endswith("/ready"))
    assert ready["ready"] is True and {"table:missions", "table:events", "bus"} <= set(ready["checks"]), ready
    tools = next(a for c, a in answers if "/metrics/tools" in c)
    assert tools["missions"] >= 1 and tools["tools"] and all(t["calls"] >= 1 for t in tools["tools"]), tools
    scored = next(a for c, a in answers if c.endswith("/evaluation"))
    assert scored["mission_id"] == values["<mission id>"] and {s["name"] for s in scored["scores"]} == {
        "response_latency",
        "tool_usage_safety",
        "delegation_depth",
        "tool_call_count",
    }


# -- docs/repositories.md and docs/cli.md: the `missions` command --------------------------------------------


def run_cli(line: str, values: dict[str, str], cwd: Path, env: dict[str, str], expect: int = 0) -> str:
    for placeholder, value in values.items():
        line = line.replace(placeholder, value)
    assert line.startswith(".venv/bin/missions ") and "<" not in line, line
    result = subprocess.run(
        ["bash", "-c", MISSIONS + line.removeprefix(".venv/bin/missions")],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == expect, (line, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, f"{line}\n{result.stderr}"  # whole, so a rare failure says why
    return result.stdout


def test_the_repository_cli_block_runs_as_written(server: DevServer, shop: Path, tmp_path: Path):
    (block,) = sh_blocks("docs/repositories.md", "## Repositories: what a mission may read")[1:]
    assert len(block) == 4, block
    env = environment(MISSIONS_API_URL=server.url, MISSIONS_CONFIG_DIR=str(tmp_path / "config"))
    with serve_git(shop) as git_url:
        values = {"https://github.com/owner/shop.git": git_url, "~/src/shop": str(shop)}
        from_git = run_cli(block[0], values, tmp_path, env)
        from_directory = run_cli(block[1], values, tmp_path, env)
    assert "ready" in from_git and "ready" in from_directory, (from_git, from_directory)
    values["<repository id>"] = from_git.split()[0]
    listed = run_cli(block[2], values, tmp_path, env)
    assert values["<repository id>"] in listed and from_directory.split()[0] in listed
    assert f"deleted {values['<repository id>']}" in run_cli(block[3], values, tmp_path, env)
    assert values["<repository id>"] not in run_cli(block[2], values, tmp_path, env)


def test_the_cli_blocks_run_as_written(server: DevServer, shop: Path, tmp_path: Path):
    local, remote = sh_blocks("docs/cli.md", "## Using the CLI")
    assert [shlex.split(line)[1] for line in local] == ["capabilities", "run", "run", "run", "asl", "classify"]
    env = environment(MISSIONS_CONFIG_DIR=str(tmp_path / "config"))
    values = {"~/src/shop": str(shop)}
    # on the emulation, in the repository (the default --repo is the current directory)
    assert "code_analysis" in run_cli(local[0], values, shop, env)
    assert "billing/tax.py:4" in run_cli(local[1], values, shop, env)  # def compute_tax
    assert "⏸ waiting for you" in run_cli(local[2], values, shop, env)
    bounded = json.loads(run_cli(local[3], values, shop, env))
    assert bounded["counters"]["llm_calls"] <= 4 and bounded["counters"]["agent_hops"] <= 8, bounded
    run_cli(local[4], values, tmp_path, env)
    assert json.loads((tmp_path / "code_analysis.asl.json").read_text())["segment"]["StartAt"]
    classified = run_cli(local[5], values, tmp_path, env)
    assert "level 3" in classified and "capability: travel" in classified, classified  # as its comment says
    # on the API (`missions dev`; MISSIONS_API_URL names it for the lines without --api-url)
    env = {**env, "MISSIONS_API_URL": server.url}
    values["127.0.0.1:8787"] = server.url.removeprefix("http://")
    ran = run_cli(remote[0], values, tmp_path, env)
    assert "▶ resumed" in ran and "terminal reason" in ran, ran
    alice = Client(server, "alice")
    status, created = alice.call("POST", "/missions", {"capability": "code_analysis", "goal": "help"})
    assert status == 202
    values["<mission id>"] = created["mission_id"]
    values["<interrupt id>"] = wait_for(alice, created["mission_id"], {"interrupted"})["pending_interrupt"][
        "interrupt_id"
    ]
    assert created["mission_id"] in run_cli(remote[1], values, tmp_path, env)  # list
    assert values["<interrupt id>"] in run_cli(remote[2], values, tmp_path, env)  # status names the question
    assert f"answered {values['<interrupt id>']}" in run_cli(remote[3], values, tmp_path, env)
    # cancel: the mission it names must still be running or waiting, so another one
    status, created = alice.call("POST", "/missions", {"capability": "code_analysis", "goal": "help"})
    values["<mission id>"] = created["mission_id"]
    wait_for(alice, created["mission_id"], {"interrupted"})
    assert f"cancelled {created['mission_id']}" in run_cli(remote[4], values, tmp_path, env)
    assert "safety violation(s)" in run_cli(remote[5], values, tmp_path, env)  # evaluate: the ended ones scored


# -- docs/repositories.md, "Code questions in any language" --------------------------------------------------


def test_the_typescript_questions_run_as_written_and_cite_what_the_page_says(tmp_path: Path):
    defined_and_called, path = sh_blocks("docs/repositories.md", "## Code questions in any language")[0]
    env = environment(MISSIONS_CONFIG_DIR=str(tmp_path / "config"))
    answer = run_cli(defined_and_called, {}, ROOT, env)
    assert "[src/uploads.ts:10]" in answer and "[src/uploads.ts:20]" in answer, answer
    assert "Uploads.create calls `toFile`" in answer and "(gap:" not in answer
    chain = run_cli(path, {}, ROOT, env)
    cited = [ref for ref in ("src/index.ts:7", "src/uploads.ts:20", "src/uploads.ts:11") if f"[{ref}]" in chain]
    assert len(cited) == 3, chain  # createUpload -> Uploads.create -> toFile -> readBytes, a call per line


# -- docs/chat-and-streaming.md, "Chat in the terminal" ------------------------------------------------------


def run_chat(line: str, values: dict[str, str], env: dict[str, str], typed: str = "") -> str:
    """A chat line as written (a pipe into it, or what a user types given on stdin: not a terminal here)."""
    for placeholder, value in values.items():
        line = line.replace(placeholder, value)
    assert ".venv/bin/missions chat " in line and "<" not in line, line
    result = subprocess.run(
        ["bash", "-c", line.replace(".venv/bin/missions", MISSIONS)],
        input=typed,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0 and "Traceback" not in result.stderr, (line, result.stdout, result.stderr)
    return result.stdout


def test_the_chat_block_runs_as_written(server: DevServer, shop: Path, tmp_path: Path):
    (block,) = sh_blocks("docs/chat-and-streaming.md", "## Chat in the terminal")
    assert len(block) == 4, block
    env = environment(MISSIONS_CONFIG_DIR=str(tmp_path / "config"))
    values = {"~/src/shop": str(shop), "127.0.0.1:8787": server.url.removeprefix("http://")}
    # on the emulation: what the user would type at the prompt, then the piped conversation
    typed = run_chat(block[0], values, env, typed="Where is compute_tax defined?\n/exit\n")
    assert "billing/tax.py:4" in typed, typed
    piped = run_chat(block[1], values, env)
    first, follow_up = piped.split("Who calls it?", 1)
    assert "billing/tax.py:4" in first and "checkout.py:5" in follow_up, piped
    # on the API (`missions dev`), and the conversation continued by the id its first reply printed
    started = run_chat(block[2], values, env, typed="Where is compute_tax defined?\n")
    values["<conversation id>"] = started.split("--conversation ", 1)[1].split(")", 1)[0]
    continued = run_chat(block[3], values, env, typed="Who calls it?\n")
    assert "compute_tax" in continued and "checkout.py:5" in continued, continued


# -- docs/home-assistant.md ----------------------------------------------------------------------------------


def test_the_home_assistant_block_runs_as_written_on_the_sample_home(tmp_path: Path):
    (block,) = sh_blocks("docs/home-assistant.md", "# The Home Assistant analyst")
    (month,) = sh_blocks("docs/home-assistant.md", "## Long-term statistics")
    (catalog,) = sh_blocks("docs/home-assistant.md", "## The catalog")
    assert len(block) == 3 and len(month) == 1 and len(catalog) == 1, block
    env = {
        k: v for k, v in environment(MISSIONS_CONFIG_DIR=str(tmp_path / "config")).items() if not k.startswith("HA_")
    }
    energy, diagnosis, switched, last_month = (" ".join(run_cli(line, {}, ROOT, env).split()) for line in block + month)
    assert "The home used 424.5 kWh" in energy
    assert "kWh from 2025-02-11 to 2025-03-14" in last_month  # the statistics before the recorded week
    refreshed = " ".join(run_cli(catalog[0], {}, ROOT, env).split())
    assert "Your home's catalog is up to date: 8 areas" in refreshed, refreshed
    assert "'wallbox' started failing" in diagnosis and "home-assistant.log:" in diagnosis
    assert "light.turn_on on light.living_room_ceiling" in switched and "light.living_room_ceiling is on" in switched


def test_the_dashboard_line_designs_and_deploys_an_energy_dashboard_on_the_sample_home(tmp_path: Path):
    ((line,),) = sh_blocks("docs/home-assistant.md", "## Dashboards")
    env = {
        k: v for k, v in environment(MISSIONS_CONFIG_DIR=str(tmp_path / "config")).items() if not k.startswith("HA_")
    }
    shown = " ".join(run_cli(line, {}, ROOT, env).split())
    # the person saw the YAML as a diff before it was saved, and the answer says what is on it
    assert "create dashboard 'Energy' at /dashboard-energy" in shown and "+ - type: statistics-graph" in shown
    assert "Dashboard /dashboard-energy: deployed." in shown


def test_the_home_assistant_connection_example_is_a_valid_environment():
    from infra.config import load_environments

    (example,) = (json.loads("{" + block + "}") for block in fenced("docs/home-assistant.md", None, "json"))
    (config,) = load_environments({"qa": example}).values()
    connection = config.connections["home_assistant"]
    assert connection.secrets == {"HA_TOKEN_SECRET": "missions-prod/home-assistant-token"}


# -- docs/chat-and-streaming.md, "Conversations": the chat API with the openai SDK, and an event stream with curl ---


def test_the_chat_example_and_the_event_stream_block_run_as_written(server: DevServer, tmp_path: Path):
    (example,) = fenced("docs/chat-and-streaming.md", "## Conversations", "python")
    alice = Client(server, "alice")
    repository = register_upload(alice, {"shop-main/billing/tax.py": TAX, "shop-main/checkout.py": CHECKOUT})
    script = example.replace("<repository id>", repository).replace(
        "localhost:8787", server.url.removeprefix("http://")
    )
    assert "<" not in script
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=240, env=environment()
    )
    assert result.returncode == 0, result.stderr
    # the first answer cites the definition; the streamed follow-up is about compute_tax and cites its caller
    assert "billing/tax.py:4" in result.stdout and "checkout.py:5" in result.stdout, result.stdout
    (block,) = sh_blocks("docs/chat-and-streaming.md", "## Conversations")
    mission_id = alice.call("GET", "/missions?limit=1")[1]["missions"][0]["mission_id"]
    first_page = alice.call("GET", f"/missions/{mission_id}/events?limit=3")[1]
    values = {"<mission id>": mission_id, "<cursor>": first_page["cursor"]}
    streamed = []
    for command in block:
        for placeholder, value in values.items():
            command = command.replace(placeholder, value)
        command = command.replace("localhost:8787", server.url.removeprefix("http://"))
        run = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        streamed.append([line for line in run.stdout.splitlines() if line.startswith("id: ")])
    # the whole stream, then what came after the third event: the same ids, the first three left out
    assert len(streamed[0]) > 3 and streamed[1] == streamed[0][3:]


def test_the_cost_block_runs_as_written():
    # Given the cost section's commands / When each runs / Then each prints a prediction, the second as JSON
    text, as_json = sh_blocks("docs/cli.md", "## What a mission will cost")[0]
    printed = [
        subprocess.run([MISSIONS, *shlex.split(line)[1:]], capture_output=True, text=True, check=True, cwd=ROOT).stdout
        for line in (text, as_json)
    ]
    assert "total per mission" in printed[0] and "assumptions:" in printed[0]
    assert json.loads(printed[1])["capability"] == "shopping"
