"""The dispatcher under real concurrency, on the DynamoDB stores in moto.

Hundreds of threads submit at once while completer threads end missions after short random
delays; we check that a user never has more than `limit` missions running, that none is lost or
started twice, and that idempotency keys deduplicate.

Why calls into moto are serialized (`SerializedClient`): moto evaluates a conditional write as
read-check-write in the calling thread, so concurrent threads interleave inside one request (a
probe saw 4 ids admitted under a size < 3 condition, and TransactWriteItems crashed with
"dictionary changed size during iteration"). DynamoDB applies each request (and each transaction)
atomically; one lock around each call emulates exactly that and nothing more. The code under test
is unchanged, and every interleaving *between* requests (stale heads, lost claims, releases racing
claims) still happens.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from missions.core.mission.requests import MissionRequest
from missions.core.specs import DISPATCH, MISSIONS
from missions.local import moto as moto_patches
from missions.ports.missions import MissionStore
from missions.service.dispatch import Dispatcher
from missions.service.lifecycle import Lifecycle
from tests.support.aws import SerializedClient

REGION = "us-east-1"
LIMIT = 3


class Executions:
    """Fake executions: start() marks one running; completer threads end it after a random delay,
    then call dispatcher.finished() (as the execution-ended notice would)."""

    def __init__(self, missions: MissionStore, completers: int = 4, delay: tuple[float, float] = (0.001, 0.01)):
        self.missions = missions
        self.dispatcher: Dispatcher | None = None
        self.delay = delay
        self.lock = threading.Lock()
        self.live: dict[str, set[str]] = {}
        self.max_live = 0
        self.starts: Counter[str] = Counter()
        self.finished = 0  # finished() calls that returned
        self.errors: list[BaseException] = []
        self._ending: queue.Queue[str | None] = queue.Queue()
        self._threads = [threading.Thread(target=self._complete, daemon=True) for _ in range(completers)]
        for thread in self._threads:
            thread.start()

    def start(self, request: MissionRequest, prepared: object = None) -> None:  # the dispatcher's Starter
        with self.lock:
            live = self.live.setdefault(request.user_id, set())
            live.add(request.mission_id)
            self.max_live = max(self.max_live, len(live))
            self.starts[request.mission_id] += 1
        self._ending.put(request.mission_id)

    def _complete(self) -> None:
        while (mission_id := self._ending.get()) is not None:
            try:
                time.sleep(random.uniform(*self.delay))
                Lifecycle(self.missions).end(mission_id, "completed")
                with self.lock:
                    self.live[self.missions.get(mission_id).user_id].discard(mission_id)
                assert self.dispatcher is not None
                self.dispatcher.finished(mission_id)
                with self.lock:
                    self.finished += 1
            except BaseException as exc:  # surfaced by the test, not lost in a thread
                self.errors.append(exc)

    def wait(self, started: int, timeout: float = 60.0) -> None:
        """Until `started` missions have started, ended, and had their finished() handled."""
        end = time.monotonic() + timeout
        while time.monotonic() < end and not self.errors:
            with self.lock:
                if sum(self.starts.values()) >= started and self.finished >= started:
                    return
            time.sleep(0.01)

    def stop(self) -> None:
        for _ in self._threads:
            self._ending.put(None)
        for thread in self._threads:
            thread.join(timeout=10)


@pytest.fixture
def cloud(monkeypatch):
    import boto3
    from moto import mock_aws

    from missions.adapters.dynamodb.dispatch import DynamoDispatchStore
    from missions.adapters.dynamodb.missions import DynamoMissionStore
    from missions.adapters.dynamodb.tables import table_definition

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    moto_patches.install()  # as the emulation runs moto: a key query reads only its partition (patch 17)
    with mock_aws():
        raw = boto3.client("dynamodb", region_name=REGION)
        raw.create_table(**table_definition(MISSIONS, "test-missions"))
        raw.create_table(**table_definition(DISPATCH, "test-dispatch"))
        client = SerializedClient(raw)
        missions = DynamoMissionStore("test-missions", client=client)
        executions = Executions(missions)
        dispatcher = Dispatcher(DynamoDispatchStore("test-dispatch", client=client), missions, executions, LIMIT)
        executions.dispatcher = dispatcher
        try:
            yield dispatcher, missions, executions
        finally:
            executions.stop()


def request(n: int, key: str | None = None) -> MissionRequest:
    priority = ["urgent", "high", "medium", "low"][n % 4]
    return MissionRequest(capability="code_qa", goal=f"goal {n}", user_id="u1", priority=priority, idempotency_key=key)


def test_200_simultaneous_submits_for_one_user(cloud):
    dispatcher, missions, executions = cloud
    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(lambda n: dispatcher.submit(request(n)), range(200)))
    executions.wait(started=200)  # about 20 s: moto spends 1-10 ms per request

    assert executions.errors == []
    assert {r.status for r in results} <= {"started", "queued"}
    assert len({r.mission_id for r in results}) == 200  # 200 distinct missions
    assert executions.max_live <= LIMIT  # never more than the limit running
    assert executions.max_live == LIMIT  # ... and the limit was reached: the test did contend
    assert set(executions.starts) == {r.mission_id for r in results}  # none lost
    assert max(executions.starts.values()) == 1  # none started twice
    assert dispatcher._store.running("u1") == set()
    assert dispatcher._store.queued("u1") == []
    assert {m.status for m in missions.list_for_user("u1", limit=1000)} == {"completed"}


def test_reused_idempotency_keys_make_one_mission_each(cloud):
    dispatcher, missions, executions = cloud
    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(lambda n: dispatcher.submit(request(n, key=f"delivery-{n % 10}")), range(50)))
    executions.wait(started=10)

    assert executions.errors == []
    assert len({r.mission_id for r in results}) == 10
    assert Counter(r.status for r in results)["duplicate"] == 40
    assert len(missions.list_for_user("u1", limit=1000)) == 10
    assert sorted(executions.starts.values()) == [1] * 10
    assert executions.max_live <= LIMIT
