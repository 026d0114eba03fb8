"""The fuzz run's set-up: before schemathesis starts, the fuzzer's account gets what six operations act on
and random data cannot make (a running mission, a paused one, a question waiting, a checkpoint, a
document a mission wrote: a travel mission asking which flight gives the last three; a repository
imported from git), and the published document gets each of those operations (and the notes, which
random ids seldom find running) an example naming it, so the examples phase answers each with a 2xx.

A mission stays running only while its stage is in flight: HELD's first stage waits on GATE, which opens once
the run has paused that mission (or when the run ends), so it holds one of the user's running slots no longer.
"""

from __future__ import annotations

import copy
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dulwich import porcelain

from missions.core.capability.registry import Capability, stage
from missions.local.emulation import LocalCloud
from tests.support.stages import Out, answering, typed_capability

WAIT = 120.0  # seconds a set-up step may take (each takes well under one offline)
POLL = 0.05


class Gate:
    """HELD's stage waits here until opened; `entered` counts the stages that arrived."""

    def __init__(self) -> None:
        self.entered = 0
        self._changed = threading.Condition()
        self._open = threading.Event()

    def hold(self) -> None:
        with self._changed:
            self.entered += 1
            self._changed.notify_all()
        self._open.wait(WAIT * 5)  # bounded: a run that dies never leaves a stage waiting for ever

    def until_entered(self, count: int) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: self.entered >= count, WAIT):
                raise TimeoutError(f"{self.entered} of {count} held stages in flight")

    def close(self) -> None:
        self._open.clear()

    def open(self) -> None:
        self._open.set()


GATE = Gate()


@stage
def hold() -> Out:
    GATE.hold()
    return Out()


@stage
def work() -> Out:
    return Out()


HELD = typed_capability(
    "fuzz_held",
    [{"name": "hold", "default_next": "work"}, {"name": "work", "default_next": "final"}, {"name": "final"}],
    hold,
    work,
    answering("final"),
    pipeline={"retry_interval_seconds": 1},
    description="a stage held in flight until the fuzz run paused it (tests.support.fuzz_setup)",
)
CAPABILITIES: tuple[Capability, ...] = (HELD,)


def git_repository(where: Path) -> Path:
    """A one-commit git repository (a file URL under the emulation's repo_roots imports from it)."""
    where.mkdir(parents=True)
    (where / "tax.py").write_text("def compute_tax(amount):\n    return amount * 0.2\n")
    porcelain.init(str(where))
    porcelain.add(str(where), [str(where / "tax.py")])
    author = b"fuzz <fuzz@example.com>"
    porcelain.commit(str(where), message=b"one file", author=author, committer=author)
    return where


@dataclass
class Client:
    url: str
    authorization: str

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": self.authorization, "Content-Type": "application/json"}
        request = urllib.request.Request(f"{self.url}{path}", data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read() or b"{}")  # type: ignore[no-any-return]
        except urllib.error.HTTPError as error:
            raise RuntimeError(f"fuzz set-up: {method} {path} -> {error.code} {error.read()[:500]!r}") from error

    def until(self, path: str, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            body = self.call("GET", path)
            if done(body):
                return body
            time.sleep(POLL)
        raise TimeoutError(f"fuzz set-up: {path} never got there: {body}")

    def mission(self, capability: str, goal: str, *statuses: str) -> dict[str, Any]:
        created = self.call("POST", "/missions", {"capability": capability, "goal": goal})
        return self.until(f"/missions/{created['mission_id']}", lambda m: m["status"] in statuses)


@dataclass
class Examples:
    """Each operation's example: its parameters' values by name, and its body."""

    parameters: dict[str, dict[str, Any]] = field(default_factory=dict)
    bodies: dict[str, dict[str, Any]] = field(default_factory=dict)

    def into(self, document: dict[str, Any]) -> dict[str, Any]:
        """The document with these examples (a copy: the coverage count keeps the published one)."""
        document = copy.deepcopy(document)
        for name in {**self.parameters, **self.bodies}:
            method, path = name.split(" ", 1)
            operation = document["paths"][path][method.lower()]
            for parameter in operation.get("parameters", []):
                if parameter["name"] in self.parameters.get(name, {}):
                    parameter["example"] = self.parameters[name][parameter["name"]]
            if name in self.bodies:
                operation["requestBody"]["content"]["application/json"]["example"] = self.bodies[name]
        return document


def prepare(client: Client, repository: Path) -> Examples:
    """Make what the six operations act on, in the fuzzer's account; their examples name it."""
    GATE.close()
    # a paused mission (to resume): paused while its held stage ran, which then ended
    paused = client.call("POST", "/missions", {"capability": HELD.name, "goal": "be paused"})["mission_id"]
    GATE.until_entered(1)
    client.until(f"/missions/{paused}", lambda m: m["status"] == "running")
    client.call("POST", f"/missions/{paused}/pause")
    GATE.open()
    client.until(f"/missions/{paused}", lambda m: m["status"] == "paused")
    # a running mission (to pause): its stage held until the run paused it
    GATE.close()
    running = client.call("POST", "/missions", {"capability": HELD.name, "goal": "be paused by the fuzzer"})
    GATE.until_entered(2)
    client.until(f"/missions/{running['mission_id']}", lambda m: m["status"] == "running")
    # a travel mission that wrote its plan, then asks which flight (its checkpoints record the stages before)
    travel = client.mission(
        "travel",
        "Plan a 5-day Paris trip for May 2026, budget $3000, 2 travelers",
        "interrupted",
        "completed",
        "failed",
    )
    question = travel["pending_interrupt"] or {}
    if question.get("kind") != "choice":
        raise RuntimeError(f"fuzz set-up: the travel mission did not ask which flight: {travel}")
    checkpoint = client.call("GET", f"/missions/{travel['mission_id']}/checkpoints")["checkpoints"][0]
    # a repository imported from git (to import again)
    registered = client.call("POST", "/repositories", {"url": f"file://{repository}"})
    client.until(f"/repositories/{registered['repository_id']}", lambda r: r["status"] == "ready")
    return Examples(
        parameters={
            "POST /missions/{mission_id}/resume": {"mission_id": paused},
            "POST /missions/{mission_id}/pause": {"mission_id": running["mission_id"]},
            "POST /missions/{mission_id}/notes": {"mission_id": running["mission_id"]},
            "POST /missions/{mission_id}/interrupts/{interrupt_id}": {
                "mission_id": travel["mission_id"],
                "interrupt_id": question["interrupt_id"],
            },
            "POST /missions/{mission_id}/fork": {"mission_id": travel["mission_id"]},
            "GET /missions/{mission_id}/artifact": {"mission_id": travel["mission_id"], "path": "plan"},
            "POST /repositories/{repository_id}/imports": {"repository_id": registered["repository_id"]},
        },
        bodies={
            "POST /missions/{mission_id}/notes": {"text": "skip the museums"},
            "POST /missions/{mission_id}/interrupts/{interrupt_id}": {"decision": question["options"][0]},
            "POST /missions/{mission_id}/fork": {"checkpoint_id": checkpoint["checkpoint_id"]},
            "POST /repositories/{repository_id}/imports": {},
        },
    )


@contextmanager
def released_once_paused(cloud: LocalCloud, examples: Examples) -> Iterator[None]:
    """Open GATE once the held mission is pausing (its slot then frees), or when the run ends."""
    mission_id = examples.parameters["POST /missions/{mission_id}/pause"]["mission_id"]
    done = threading.Event()

    def watch() -> None:
        while not done.wait(POLL):
            if cloud.runtime.missions.get(mission_id).status != "running":
                break
        GATE.open()

    watcher = threading.Thread(target=watch, name="fuzz-gate", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
