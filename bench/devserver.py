"""The dev server under load, over real HTTP: offline shopping missions per second, and its memory.

`missions dev` as a user runs it (every capability, the offline scripted model) serves on
127.0.0.1; CLIENTS threads, each a user of its own (so the per-user limit of 3 running missions is
never what waits), drive whole shopping journeys through the API as docs/api.md's curl calls do:
POST /missions, poll GET /missions/{id} until it asks for a choice, answer it, poll until it ends.
A mission counts when its GET shows a terminal status.

- baseline: one mission alone (the median of SOLO journeys, nothing else running). Throughput times
  the baseline is the number of missions the server effectively overlapped (1.0: no better than one
  after another).
- throughput: MISSIONS journeys after WARMUP ones; also the process's CPU seconds per mission (the
  handlers, moto and the clients share one interpreter: CPU seconds per wall second near 1 means the
  GIL, not the server, sets the pace).
- memory: VmRSS of the process (from /proc/self/status) after the warm-up and at the end, each after a
  full gc, and every RSS_EVERY missions in between without one (a full collection of this heap takes
  about half a second, all other threads waiting: it would be counted against the throughput); the
  clients live in the same process and hold next to nothing.
- staying fast: missions per second over the first WINDOW missions and over the last WINDOW (each
  from the completion before it; the first from the start), and their ratio: an emulation that does
  work in proportion to its history (a query walking every item ever written) slows down as it runs.
  The server runs as `missions dev --retain-minutes RETAIN_MINUTES` would: ended missions are
  archived and their bulky items pruned, so the tables, held in memory, stop growing.

- machine speed: a fixed pure-Python loop (no I/O, one thread), timed before the server starts and
  after the load, in million steps per second. The shared machines here run the same code up to a
  third slower from one minute to the next; the two figures say how fast this run's machine was.

It runs in a fresh interpreter (`run` starts one), so what other benchmarks loaded is not counted.
"""

from __future__ import annotations

import gc
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOAL = "Find the best price for Sony WH-1000XM5 headphones"
MISSIONS = 1_000
WARMUP = 50
SOLO = 5
CLIENTS = 16
POLL = 0.05  # seconds between two GETs of one mission (the e2e tests poll as often)
RSS_EVERY = 100
TERMINAL = {"completed", "failed", "cancelled", "archived"}
WINDOW = 100
RETAIN_MINUTES = 0.5  # `missions dev --retain-minutes`: retention runs every 15 s
TARGETS = {"missions_per_second": 5.0, "rss_mb_after": 300.0, "first_over_last": 1.2}
RESULT = "bench.devserver: "


def machine_speed(steps: int = 3_000_000) -> float:
    """Million steps per second of a fixed pure-Python loop (the best of three)."""
    best = float("inf")
    for _ in range(3):
        began, table = time.perf_counter(), {}
        for step in range(steps):
            table[step & 1023] = step
        best = min(best, time.perf_counter() - began)
    return round(steps / best / 1e6, 2)


def rss_mb(collect: bool = True) -> float:
    if collect:
        gc.collect()
    with open("/proc/self/status") as status:
        kilobytes = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return round(kilobytes / 1024, 1)


class Client:
    """One user's HTTP calls, over one kept-alive connection (as an HTTP client library keeps one);
    a connection the server closed is opened again."""

    def __init__(self, url: str, user: str, errors: list[str]):
        self.url, self.user, self.errors = url, user, errors
        self._connection: http.client.HTTPConnection | None = None

    def _send(self, method: str, path: str, data: bytes | None, headers: dict[str, str]) -> tuple[int, bytes]:
        if self._connection is None:
            parts = urllib.parse.urlsplit(self.url)
            self._connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=120)
        self._connection.request(method, path, body=data, headers=headers)
        response = self._connection.getresponse()
        text = response.read()
        if response.will_close:
            self._connection.close()
            self._connection = None
        return response.status, text

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"content-type": "application/json", "Authorization": f"Bearer dev:{self.user}"}
        try:
            status, text = self._send(method, path, data, headers)
        except (ConnectionError, http.client.HTTPException):  # closed while idle: once more, on a new one
            self._connection = None
            status, text = self._send(method, path, data, headers)
        if status >= 500:
            self.errors.append(f"{method} {path.split('/')[1]}: {status} {text[:200]!r}")
        return status, json.loads(text) if text else None

    def until(self, mission_id: str, statuses: set[str], timeout: float = 300) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, mission = self.call("GET", f"/missions/{mission_id}")
            if status == 200 and mission["status"] in statuses:
                return dict(mission)
            time.sleep(POLL)
        raise TimeoutError(f"mission {mission_id} did not reach {statuses} in {timeout} s")

    def journey(self) -> str:
        """One shopping mission, asked, answered and ended: its terminal status."""
        status, created = self.call("POST", "/missions", {"goal": GOAL, "capability": "shopping"})
        if status != 202:
            raise RuntimeError(f"POST /missions: {status} {created}")
        mission_id = created["mission_id"]
        mission = self.until(mission_id, TERMINAL | {"interrupted"})
        while mission["status"] == "interrupted":
            pending = mission["pending_interrupt"]
            if pending is None:  # the question is being recorded: look again
                time.sleep(POLL)
                mission = self.until(mission_id, TERMINAL | {"interrupted"})
                continue
            path = f"/missions/{mission_id}/interrupts/{pending['interrupt_id']}"
            status, body = self.call("POST", path, {"decision": pending["options"][0]})
            if status != 200:
                raise RuntimeError(f"POST {path}: {status} {body}")
            mission = self.until(mission_id, TERMINAL)
        return str(mission["status"])


def _drive(url: str, count: int, errors: list[str], rss: list[tuple[int, float]] | None = None) -> dict[str, Any]:
    """`count` journeys over CLIENTS users at once; each user runs one mission at a time."""
    done: list[str] = []
    ended: list[float] = []  # when each journey ended (perf_counter), in order
    lock = threading.Lock()
    next_index = iter(range(count))

    def user(number: int) -> None:
        client = Client(url, f"bench-{number:02d}", errors)
        while True:
            with lock:
                if next(next_index, None) is None:
                    return
            try:
                status = client.journey()
            except Exception as exc:  # counted, not fatal: the figure says how many failed
                status = f"error: {type(exc).__name__}: {exc}"[:200]
            with lock:
                done.append(status)
                ended.append(time.perf_counter())
                if rss is not None and len(done) % RSS_EVERY == 0:
                    rss.append((len(done), rss_mb(collect=False)))

    cpu, started = time.process_time(), time.perf_counter()
    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(user, range(CLIENTS)))
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    completed = sum(status == "completed" for status in done)
    window = min(WINDOW, len(ended))
    first = window / (ended[window - 1] - started) if window else 0.0
    last = window / (ended[-1] - (ended[-window - 1] if len(ended) > window else started)) if window else 0.0
    return {
        "missions": count,
        "completed": completed,
        "not_completed": sorted({s for s in done if s != "completed"})[:5],
        "wall_seconds": round(wall, 1),
        "missions_per_second": round(completed / wall, 2),
        "cpu_seconds_per_mission": round(cpu / max(1, len(done)), 3),
        "cpu_per_wall": round(cpu / wall, 2),
        "window": window,
        "first_missions_per_second": round(first, 2),
        "last_missions_per_second": round(last, 2),
        "first_over_last": round(first / last, 2) if last else None,
        "missions_per_second_by_window": [
            round(WINDOW / (ended[end - 1] - (ended[end - WINDOW - 1] if end > WINDOW else started)), 2)
            for end in range(WINDOW, len(ended) + 1, WINDOW)
        ],
    }


def measure(missions: int = MISSIONS, warmup: int = WARMUP) -> dict[str, Any]:
    """In this process: the dev server, its baseline, throughput and memory."""
    from missions.local.devserver import DevServer
    from missions.local.emulation import LocalCloud

    errors: list[str] = []
    speed_before = machine_speed()
    retention = {"retention_minutes": RETAIN_MINUTES}
    with (
        LocalCloud(settings=retention) as cloud,
        DevServer(cloud, port=0, retention_every=RETAIN_MINUTES * 30) as server,
    ):
        started = rss_mb()
        solo_client = Client(server.url, "bench-solo", errors)
        solo_client.journey()  # the first one pays for imports and caches
        solo = []
        for _ in range(SOLO):
            began = time.perf_counter()
            assert solo_client.journey() == "completed"
            solo.append(time.perf_counter() - began)
        _drive(server.url, warmup, errors)
        warm = rss_mb()
        samples: list[tuple[int, float]] = []
        load = _drive(server.url, missions, errors, samples)
        after = rss_mb()
    speed_after = machine_speed()
    baseline = statistics.median(solo)
    per_hundred = [
        round((b - a) * 100 / (n - m), 1) for (m, a), (n, b) in zip(samples, samples[1:], strict=False) if n > m
    ]
    return {
        "clients": CLIENTS,
        "retain_minutes": RETAIN_MINUTES,
        "poll_seconds": POLL,
        "solo_mission_seconds": round(baseline, 3),
        "solo_missions_per_second": round(1 / baseline, 2),
        **load,
        "overlap": round(load["missions_per_second"] * baseline, 2),
        "rss_mb_started": started,
        "rss_mb_after_warmup": warm,
        "rss_mb_after": after,
        "rss_mb_samples": samples,
        "rss_mb_per_100_missions": per_hundred,
        "server_errors": len(errors),
        "server_error_examples": sorted(set(errors))[:5],
        "machine_speed_before": speed_before,
        "machine_speed_after": speed_after,
    }


def run() -> dict[str, Any]:
    """`measure`, in a fresh interpreter, offline whatever the environment says."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AWS_"))}
    result = subprocess.run(
        [sys.executable, "-m", "bench.devserver", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if result.returncode != 0:
        raise RuntimeError(f"bench.devserver failed:\n{result.stderr[-4000:]}")
    # the handlers' metrics (EMF) share stdout: the result is the line that says it is one
    line = next(line for line in reversed(result.stdout.splitlines()) if line.startswith(RESULT))
    return dict(json.loads(line[len(RESULT) :]))


def checks(results: dict[str, Any]) -> dict[str, bool]:
    return {
        f"dev server: >= {TARGETS['missions_per_second']:g} missions/s offline": results["missions_per_second"]
        >= TARGETS["missions_per_second"],
        f"dev server: <= {TARGETS['rss_mb_after']:g} MB after {results['missions']:,} missions": results["rss_mb_after"]
        <= TARGETS["rss_mb_after"],
        f"dev server: the first {results['window']} missions/s <= {TARGETS['first_over_last']:g}x the last's": (
            results["first_over_last"] is not None and results["first_over_last"] <= TARGETS["first_over_last"]
        ),
    }


def rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    r = results
    slope = r["rss_mb_per_100_missions"]
    return [
        (
            "dev server: one shopping mission alone (HTTP)",
            f"{r['solo_mission_seconds']} s ({r['solo_missions_per_second']}/s)",
        ),
        (
            f"dev server: {r['missions']:,} missions, {r['clients']} users at once",
            f"{r['missions_per_second']} missions/s ({r['overlap']}x one alone), {r['completed']} completed, "
            f"{r['server_errors']} 5xx",
        ),
        (
            f"dev server: missions/s, first {r['window']} / last {r['window']}",
            f"{r['first_missions_per_second']} / {r['last_missions_per_second']} ({r['first_over_last']}x)",
        ),
        (
            "dev server: CPU per mission",
            f"{r['cpu_seconds_per_mission']} s ({r['cpu_per_wall']} CPU s per wall s)",
        ),
        (
            "dev server: machine speed before / after (a fixed Python loop)",
            f"{r['machine_speed_before']} / {r['machine_speed_after']} M steps/s",
        ),
        (
            "dev server: RSS after warm-up / after the missions",
            f"{r['rss_mb_after_warmup']} / {r['rss_mb_after']} MB "
            f"(+{statistics.median(slope) if slope else 0} MB per 100 missions)",
        ),
    ]


def main() -> None:
    if "--json" in sys.argv:
        print(RESULT + json.dumps(measure()))
        return
    results = measure(int(sys.argv[1]) if len(sys.argv) > 1 else MISSIONS)
    print(json.dumps(results, indent=2))
    for name, met in checks(results).items():
        print(f"{'met' if met else 'NOT MET'}: {name}")


if __name__ == "__main__":
    main()
