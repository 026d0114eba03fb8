"""`missions chat` as a user runs it: lines on stdin (not a terminal), a conversation on the embedded
emulation (an in-process dev server), and on an API (a dev server on a free port) with questions
answered by the next line, errors as one line, and Ctrl-C that stops following a reply."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from missions.cli import Wiring, app
from missions.core.capability.registry import Ctx, stage
from missions.core.mission.envelope import InterruptKind
from missions.local.devserver import DevServer
from missions.local.emulation import LocalCloud
from tests.e2e.test_conversations_e2e import shop_repository
from tests.integration.conftest import chain, final_answer, make_capability, with_capabilities
from tests.support.stages import Answer, Out

pytestmark = pytest.mark.e2e
MISSIONS = [sys.executable, "-m", "missions.cli"]
GATE = threading.Event()


@stage
def decide(ctx: Ctx) -> Answer:
    reply = ctx.ask(InterruptKind.CONFIRMATION, "Delete the 2 old backups?", data={"diff": "- backups/2024.tar"})
    return Answer(answer="Deleted both backups." if reply.approved else f"Kept them: {reply.text}")


@stage
def hold() -> Out:
    GATE.wait(60)
    return Out()


APPROVES = make_capability("t_chat_approves", chain("decide"), decide)
SLOW = make_capability("t_chat_slow", chain("hold", "final"), hold, final_answer("finally done"))


def environment(**extra: str) -> dict[str, str]:
    """No model key, no API named, no cached token: only what the test gives."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AWS_", "MISSIONS_"))}
    return {**env, "MISSIONS_CONFIG_DIR": "/nonexistent/missions-config", **extra}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    names, known = with_capabilities(APPROVES, SLOW)
    with LocalCloud(names, registry=known) as cloud, DevServer(cloud, port=0) as dev:
        yield dev


def test_piped_questions_are_a_conversation_on_the_emulation(tmp_path_factory: pytest.TempPathFactory):
    repo = shop_repository(tmp_path_factory)
    # When two lines are piped into `missions chat code_analysis --repo ...`, no API configured
    result = subprocess.run(
        [*MISSIONS, "chat", "code_analysis", "--repo", str(repo)],
        input="Where is compute_tax defined?\nWho calls it?\n",
        env=environment(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    # Then both are answered in one conversation, on the embedded emulation, with their progress
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "embedded emulation" in out and "Traceback" not in result.stderr
    first, second = out.split("you› Who calls it?")
    assert "tax.py:1" in first and "▸ planner" in first, first
    assert "compute_tax" in second and "shop.py:5" in second, second  # "it" is compute_tax: the memory
    assert out.count("--conversation conv_") == 1  # named once


def chat(server: DevServer, *args: str, lines: list[str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        app,
        ["chat", *args, "--stream-url", server.url],
        input="".join(f"{line}\n" for line in lines),
        obj=Wiring(),
        env=environment(USER="ana"),
    )
    return result.exit_code, result.stdout, result.stderr


def test_a_question_is_answered_by_the_next_line_and_an_error_is_one_line(server: DevServer):
    # Given a message the API refuses (too long), then a request that asks for approval, then "approve"
    code, out, err = chat(server, "t_chat_approves", lines=["x" * 10_001, "clean up my backups", "approve", "/exit"])
    # Then the refusal is one line with the API's message, and the conversation goes on
    assert err.count("error:") == 1 and "HTTP 413: the last user message has 10001 characters" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    # the question is the reply, with what would change; the next line answers it and the mission ends
    asked, answered = out.split("you› approve")
    assert "Delete the 2 old backups?" in asked and "backups/2024.tar" in asked and "waits for your answer" in asked
    assert "Deleted both backups." in answered, out
    assert code == 1  # one message got no reply


def test_an_unknown_capability_is_one_line_before_any_message(server: DevServer):
    code, _, err = chat(server, "t_no_such", lines=["hello"])
    assert code == 2 and "has no capability 't_no_such'" in err and "t_chat_approves" in err, err


def _read_until(process: subprocess.Popen[str], text: str, timeout: float = 60) -> str:
    assert process.stdout is not None
    seen, deadline = "", time.monotonic() + timeout
    while text not in seen:
        assert time.monotonic() < deadline, seen
        if select.select([process.stdout], [], [], 0.5)[0]:
            seen += process.stdout.readline()
    return seen


def _signal_masks(pid: int) -> str:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return " ".join(line for line in lines if line.startswith(("SigIgn", "SigCgt", "SigBlk")))


def test_ctrl_c_stops_following_a_reply_and_the_next_message_gets_its_result(server: DevServer):
    GATE.clear()
    process = subprocess.Popen(
        [*MISSIONS, "chat", "t_chat_slow", "--api-url", server.url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment(USER="bea"),
        text=True,
    )
    assert process.stdin is not None
    try:
        # Given a reply that is taking its time
        process.stdin.write("take your time\n")
        process.stdin.flush()
        _read_until(process, "--conversation conv_")  # the reply began (its headers came)
        time.sleep(3)  # and the CLI follows its stream (a mission's first segment starts first)
        masks = _signal_masks(process.pid)
        # When the user presses Ctrl-C
        process.send_signal(signal.SIGINT)
        time.sleep(0.5)
        GATE.set()
        # and writes again
        out, err = process.communicate("done yet?\n", timeout=120)
    finally:
        GATE.set()
        if process.poll() is None:
            process.kill()
    # Then it stopped following (the mission went on), and the next reply hands over its result
    assert "stopped following the reply; mission m_" in err and "Traceback" not in err, (err, masks, out)
    assert "Your earlier request" in out and "finally done" in out, out
    assert process.returncode == 0


def test_login_caches_the_stream_url_and_chat_streams_there(tmp_path: Path, server: DevServer):
    """The stream URL a login named is used for the API it named; --stream-url and the env win over it."""
    from missions.cli._target import stream_base
    from missions.client import Endpoints, TokenCache

    cache = TokenCache(tmp_path / "tokens.json")
    wiring = Wiring(cache=lambda: cache)
    api = Endpoints("https://api.example/")
    assert stream_base(wiring, api, None) == "https://api.example"  # the API's own URL: the dev server's case
    assert stream_base(wiring, Endpoints(api.api_url, stream_url="https://out.example/"), None) == (
        "https://out.example"
    )
    cache.put_stream_url(api.api_url, "https://cached.example/")
    assert stream_base(wiring, api, None) == "https://cached.example"
    assert stream_base(wiring, api, "https://flag.example") == "https://flag.example"
    assert cache.remove(api.api_url) is False and cache.stream_url(api.api_url) is None  # logout forgets it
