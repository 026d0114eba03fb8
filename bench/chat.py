"""The chat API on the dev server over the embedded emulation, with the offline model, over real HTTP.

- first byte: the time from sending a `stream: true` chat completion (code_analysis, a new
  conversation each) to the first byte of its body (the role chunk: the message was read, the
  conversation found, the mission started), median of TTFB_RUNS. Baselines measured in the same run,
  interleaved with it, each on a fresh loopback connection as the chat is: the first byte of
  `GET /v1/models` (the same stream function, no mission started) and of `POST /missions` answering
  202 (a mission started through the API function). Each mission is followed to its end before the
  next request, so none measures another's work.
- working memory: one conversation of TURNS follow-ups about a small repository (code_analysis,
  named by X-Conversation-Id, the repository sent with the first message only); after each turn,
  the size of the working memory as stored (`WorkingMemory.size()`: the JSON the 16 KB cap bounds,
  read from the conversations store). The memory keeps the last KEEP_TURNS turns whole and older
  ones a line each, at most MAX_BYTES: the series' max and last are reported against the size after
  turn KEEP_TURNS, and `bounded` says whether it kept its bound (`make bench` fails when not).

It runs in a fresh interpreter (`run` starts one), offline whatever the environment says.
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TTFB_RUNS = 9
USER = "bench-chat"
RESULT = "bench.chat: "
TAX = 'def compute_tax(amount, rate=0.2):\n    """Tax owed."""\n    return round(amount * rate, 2)\n'
SHOP = "from tax import compute_tax\n\n\ndef checkout(total):\n    return total + compute_tax(total)\n"
FOLLOW_UPS = [
    "Where is compute_tax defined?",
    "Who calls it?",
    "What does it return?",
    "Where is checkout defined?",
    "What does it call?",
    "Which file is it in?",
    "Is rate a parameter of compute_tax?",
    "Where is it used?",
    "What else uses it?",
    "Summarize what we found about compute_tax.",
]
TURNS = 20


def _request(url: str, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
    """(seconds to the body's first byte, status, the whole body, the response's headers) on a new connection."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=300)
    sent = {"Authorization": f"Bearer dev:{USER}", "content-type": "application/json", **(headers or {})}
    data = json.dumps(body).encode() if body is not None else None
    try:
        connection.connect()
        started = time.perf_counter()
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        first = response.read(1)
        ttfb = time.perf_counter() - started
        rest = first + response.read()
        return ttfb, response.status, rest, {k.lower(): v for k, v in response.getheaders()}
    finally:
        connection.close()


def _until_ended(url: str, mission_id: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        _, status, body, _ = _request(url, "GET", f"/missions/{mission_id}")
        if status == 200 and json.loads(body)["status"] in ("completed", "failed", "cancelled"):
            return
        time.sleep(0.05)
    raise TimeoutError(f"mission {mission_id} did not end")


def _chat_body(goal: str, repo: str | None, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "code_analysis", "messages": [{"role": "user", "content": goal}]}
    if stream:
        body["stream"] = True
    if repo is not None:
        body["context"] = {"repo": repo}
    return body


def first_bytes(url: str, repo: str) -> dict[str, Any]:
    chat, models, starts = [], [], []
    _request(url, "POST", "/v1/chat/completions", _chat_body(FOLLOW_UPS[0], repo, stream=True))  # pays first use
    for _ in range(TTFB_RUNS):
        seconds, status, _, _ = _request(url, "GET", "/v1/models")
        assert status == 200
        models.append(seconds)
        seconds, status, body, _ = _request(
            url, "POST", "/missions", {"capability": "code_analysis", "goal": FOLLOW_UPS[0], "context": {"repo": repo}}
        )
        assert status == 202, body
        starts.append(seconds)
        _until_ended(url, json.loads(body)["mission_id"])
        seconds, status, body, _ = _request(
            url, "POST", "/v1/chat/completions", _chat_body(FOLLOW_UPS[0], repo, stream=True)
        )
        assert status == 200 and body.rstrip().endswith(b"data: [DONE]"), body[-300:]  # read to its end
        chat.append(seconds)
    median = {name: statistics.median(values) for name, values in (("chat", chat), ("models", models))}
    median["start"] = statistics.median(starts)
    return {
        "runs": TTFB_RUNS,
        "chat_stream_ms": round(median["chat"] * 1000, 1),
        "models_ms": round(median["models"] * 1000, 1),
        "post_missions_ms": round(median["start"] * 1000, 1),
        "ratio_to_models": round(median["chat"] / median["models"], 2),
        "ratio_to_post_missions": round(median["chat"] / median["start"], 2),
    }


def working_memory(url: str, repo: str, cloud: Any) -> dict[str, Any]:
    from missions.core.memory.conversation import KEEP_TURNS, MAX_BYTES

    sizes: list[int] = []
    conversation: str | None = None
    for turn in range(TURNS):
        goal = FOLLOW_UPS[turn % len(FOLLOW_UPS)]
        headers = {"X-Conversation-Id": conversation} if conversation else {}
        body = _chat_body(goal, repo if conversation is None else None, stream=False)
        _, status, reply, answered = _request(url, "POST", "/v1/chat/completions", body, headers)
        assert status == 200 and json.loads(reply)["mission_status"] == "completed", reply[:300]
        conversation = answered["x-conversation-id"]
        found = cloud.runtime.conversations.get(USER, conversation)
        assert found is not None and len(found[0].turns) == min(turn + 1, KEEP_TURNS), found
        sizes.append(found[0].size())
    at_keep = sizes[KEEP_TURNS - 1]
    # past KEEP_TURNS a turn adds one summary line (and a reply's digest, names in focus), never a whole turn
    whole_turn = statistics.median(b - a for a, b in zip(sizes[: KEEP_TURNS - 1], sizes[1:KEEP_TURNS], strict=True))
    later = [b - a for a, b in zip(sizes[KEEP_TURNS - 1 :], sizes[KEEP_TURNS:], strict=False)]
    return {
        "turns": TURNS,
        "bytes": sizes,
        "after_keep_turns": at_keep,
        "keep_turns": KEEP_TURNS,
        "max": max(sizes),
        "last": sizes[-1],
        "max_ratio": round(max(sizes) / at_keep, 2),
        "last_ratio": round(sizes[-1] / at_keep, 2),
        "bytes_per_turn_whole": round(whole_turn),
        "bytes_per_turn_later": round(statistics.median(later)),
        "cap_bytes": MAX_BYTES,
        "bounded": max(sizes) <= MAX_BYTES and statistics.median(later) < whole_turn,
    }


def measure() -> dict[str, Any]:
    from missions.local.devserver import DevServer
    from missions.local.emulation import LocalCloud

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        repo = Path(scratch) / "shop"
        repo.mkdir()
        (repo / "tax.py").write_text(TAX)
        (repo / "shop.py").write_text(SHOP)
        with (
            LocalCloud(["code_analysis"], settings={"repo_roots": [str(repo)]}) as cloud,
            DevServer(cloud, port=0) as server,
        ):
            figures = {
                "first_byte": first_bytes(server.url, str(repo)),
                "working_memory": working_memory(server.url, str(repo), cloud),
            }
    return {**figures, "wall_seconds": round(time.perf_counter() - started, 1)}


def run() -> dict[str, Any]:
    """`measure`, in a fresh interpreter, offline whatever the environment says."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AWS_"))}
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "bench.chat", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800
    )
    if result.returncode != 0:
        raise RuntimeError(f"bench.chat failed:\n{result.stderr[-4000:]}")
    # the handlers' metrics (EMF) share stdout: the result is the line that says it is one
    line = next(line for line in reversed(result.stdout.splitlines()) if line.startswith(RESULT))
    return {**json.loads(line[len(RESULT) :]), "process_seconds": round(time.perf_counter() - started, 1)}


def checks(results: dict[str, Any]) -> dict[str, bool]:
    memory = results["working_memory"]
    return {
        f"chat: working memory bounded over {memory['turns']} turns (<= {memory['cap_bytes'] // 1024} KB, "
        f"a line per turn past {memory['keep_turns']})": memory["bounded"],
    }


def rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    ttfb, memory = results["first_byte"], results["working_memory"]
    return [
        (
            f"chat (dev server, offline): first streamed byte of a stream: true completion, median of {ttfb['runs']}",
            f"{ttfb['chat_stream_ms']} ms = {ttfb['ratio_to_models']}x the first byte of GET /v1/models "
            f"({ttfb['models_ms']} ms), {ttfb['ratio_to_post_missions']}x POST /missions answering 202 "
            f"({ttfb['post_missions_ms']} ms)",
        ),
        (
            f"chat: working memory over {memory['turns']} follow-ups (code_analysis, small repo)",
            f"after turn {memory['keep_turns']} {memory['after_keep_turns'] / 1024:.1f} KB; max "
            f"{memory['max'] / 1024:.1f} KB ({memory['max_ratio']}x), last {memory['last'] / 1024:.1f} KB "
            f"({memory['last_ratio']}x); +{memory['bytes_per_turn_later']} B a turn past {memory['keep_turns']} "
            f"vs +{memory['bytes_per_turn_whole']} B a whole turn; cap {memory['cap_bytes'] // 1024} KB",
        ),
        ("chat: bench time", f"{results['process_seconds']} s (measuring {results['wall_seconds']} s)"),
    ]


def main() -> None:
    if "--json" in sys.argv:
        print(RESULT + json.dumps(measure()))
        return
    print(json.dumps(measure(), indent=2))


if __name__ == "__main__":
    main()
