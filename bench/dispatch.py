"""Dispatcher benchmark: 1,000 trigger events for 50 users, in memory and on DynamoDB (moto).

Events have mixed priorities (and some deadlines); about 5% repeat an earlier event's idempotency
key, as a retried webhook delivery would. Submits run on 16 threads; fake executions end after a
random 1-5 ms and then call `Dispatcher.finished`, as the execution-ended notice would.

Each backend reports wall seconds, missions started, duplicates detected (must equal the repeated
keys), duplicates started (must be 0), lost (must be 0), and the most missions one user had
running at once (must be <= the limit).

Calls into moto are serialized (one lock per client): moto evaluates a conditional write as
read-check-write in the caller's thread, so concurrent threads would break the atomicity that
DynamoDB guarantees per request; the lock restores exactly that (see
tests/integration/test_dispatch_concurrency.py). Moto's timings are not DynamoDB's.
"""

from __future__ import annotations

import json
import queue
import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from missions.adapters.memory.dispatch import InMemoryDispatchStore
from missions.adapters.memory.missions import MemoryMissionStore
from missions.core.mission.envelope import Envelope
from missions.core.mission.requests import MissionRequest
from missions.core.triggers.declared import Priority, TriggerSource
from missions.ports.dispatch import QueueEntry
from missions.ports.missions import MissionStore
from missions.service.dispatch import Dispatcher, DispatchResult, mission_id_for
from missions.service.lifecycle import Lifecycle

EVENTS = 1_000
USERS = 50
REPEATED = 50  # ~5% of the events reuse an earlier event's idempotency key
LIMIT = 3
SUBMITTERS = 16
COMPLETERS = 8
REGION = "us-east-1"


def trigger_events(seed: int = 7) -> list[MissionRequest]:
    """EVENTS requests; REPEATED of them repeat an earlier request's (user, key), later on."""
    rng = random.Random(seed)
    priorities = [Priority.URGENT, Priority.HIGH, Priority.MEDIUM, Priority.LOW]
    triggers = [TriggerSource.WEBHOOK, TriggerSource.SCHEDULE, TriggerSource.MEMORY, TriggerSource.API]
    unique = []
    for n in range(EVENTS - REPEATED):
        unique.append(
            MissionRequest(
                capability="code_qa",
                goal=f"event {n}",
                user_id=f"user-{rng.randrange(USERS):02d}",
                priority=rng.choices(priorities, weights=[1, 2, 5, 2])[0],
                deadline=f"2030-01-{rng.randint(1, 28):02d}T12:00:00Z" if rng.random() < 0.3 else None,
                trigger=rng.choice(triggers),
                idempotency_key=f"event-{n}",
            )
        )
    events = list(unique)
    for original in rng.sample(range(len(unique)), REPEATED):
        events.insert(rng.randint(original + 1, len(events)), unique[original])
    return events


class SerializedClient:
    """A boto3 client whose calls run one at a time: DynamoDB's per-request atomicity, in moto."""

    def __init__(self, client: Any):
        self._client = client
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attribute(*args, **kwargs)

        return call


class Executions:
    """Fake executions that end after a short random delay and report it to the dispatcher."""

    def __init__(self, missions: MissionStore, seed: int = 11):
        self.missions = missions
        self.dispatcher: Dispatcher | None = None
        self.lock = threading.Lock()
        self.rng = random.Random(seed)
        self.live: dict[str, set[str]] = {}
        self.owner: dict[str, str] = {}
        self.max_live = 0
        self.starts: Counter[str] = Counter()
        self.finished = 0
        self.errors: list[BaseException] = []
        self._ending: queue.Queue[str | None] = queue.Queue()
        self._threads = [threading.Thread(target=self._complete, daemon=True) for _ in range(COMPLETERS)]
        for thread in self._threads:
            thread.start()

    def start(self, request: MissionRequest, prepared: Envelope | None = None) -> None:  # the dispatcher's Starter
        assert request.mission_id is not None
        with self.lock:
            live = self.live.setdefault(request.user_id, set())
            live.add(request.mission_id)
            self.owner[request.mission_id] = request.user_id
            self.max_live = max(self.max_live, len(live))
            self.starts[request.mission_id] += 1
        self._ending.put(request.mission_id)

    def resume(self, entry: QueueEntry) -> None:  # the Starter's: these events queue no answers to hand over
        raise NotImplementedError("the bench dispatches new missions only")

    def redeliver(self, entry: QueueEntry) -> None:  # the Starter's: these events queue no answers to hand over
        raise NotImplementedError("the bench dispatches new missions only")

    def _complete(self) -> None:
        while (mission_id := self._ending.get()) is not None:
            try:
                with self.lock:
                    delay = self.rng.uniform(0.001, 0.005)
                time.sleep(delay)
                Lifecycle(self.missions).end(mission_id, "completed")
                with self.lock:
                    self.live[self.owner[mission_id]].discard(mission_id)
                assert self.dispatcher is not None
                self.dispatcher.finished(mission_id)
                with self.lock:
                    self.finished += 1
            except BaseException as exc:
                self.errors.append(exc)

    def wait(self, expected: int, timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end and not self.errors:
            with self.lock:
                if self.finished >= expected and sum(self.starts.values()) >= expected:
                    return
            time.sleep(0.005)

    def stop(self) -> None:
        for _ in self._threads:
            self._ending.put(None)
        for thread in self._threads:
            thread.join(timeout=10)


def dispatch_all(store: Any, missions: MissionStore, events: list[MissionRequest], timeout: float) -> dict[str, Any]:
    executions = Executions(missions)
    dispatcher = Dispatcher(store, missions, executions, limit=LIMIT)
    executions.dispatcher = dispatcher
    expected = len({mission_id_for(e) for e in events})
    began = time.perf_counter()
    try:
        with ThreadPoolExecutor(SUBMITTERS) as pool:
            results: list[DispatchResult] = list(pool.map(dispatcher.submit, events))
        executions.wait(expected, timeout)
    finally:
        executions.stop()
    wall = time.perf_counter() - began
    if executions.errors:
        raise executions.errors[0]
    created = {r.mission_id for r in results if r.status != "duplicate"}
    return {
        "wall_seconds": round(wall, 2),
        "missions_started": len(executions.starts),
        "duplicates_detected": sum(r.status == "duplicate" for r in results),
        "duplicates_started": sum(n - 1 for n in executions.starts.values()),
        "lost": len(created - set(executions.starts)),
        "max_concurrent_per_user": executions.max_live,
        "still_queued": sum(len(store.queued(f"user-{u:02d}")) for u in range(USERS)),
    }


def on_memory(events: list[MissionRequest]) -> dict[str, Any]:
    return dispatch_all(InMemoryDispatchStore(), MemoryMissionStore(), events, timeout=60)


def on_moto(events: list[MissionRequest]) -> dict[str, Any]:
    import boto3
    from moto import mock_aws

    from missions.adapters.dynamodb.dispatch import DynamoDispatchStore
    from missions.adapters.dynamodb.missions import DynamoMissionStore
    from missions.adapters.dynamodb.tables import table_definition
    from missions.core.specs import DISPATCH, MISSIONS

    with mock_aws():
        raw = boto3.client("dynamodb", region_name=REGION)
        raw.create_table(**table_definition(MISSIONS, "bench-missions"))
        raw.create_table(**table_definition(DISPATCH, "bench-dispatch"))
        client = SerializedClient(raw)
        store = DynamoDispatchStore("bench-dispatch", client=client)
        return dispatch_all(store, DynamoMissionStore("bench-missions", client=client), events, timeout=300)


def run() -> dict[str, Any]:
    events = trigger_events()
    return {
        "events": len(events),
        "users": USERS,
        "limit": LIMIT,
        "repeated_keys": REPEATED,
        "memory": on_memory(events),
        "dynamodb_moto": on_moto(events),
    }


def main() -> None:
    print(json.dumps(run(), indent=2))


if __name__ == "__main__":
    main()
