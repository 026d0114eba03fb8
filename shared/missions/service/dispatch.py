"""The dispatcher: deduplicate mission requests, cap each user's running missions, queue the rest.

Pure logic over two ports (a `DispatchStore` and a `MissionStore`, whose statuses it writes through
the `Lifecycle`); what it claims it hands to a `Starter` (the launcher's starting part, which knows
nothing of queues). The DynamoDB adapter of the dispatch store is `missions.adapters.dynamodb.dispatch`,
the in-memory one `missions.adapters.memory.dispatch`.

Deduplication. A request's mission id is derived from its idempotency key (`mission_id_for`), the
mission record is created queued with a conditional write, and the execution name is the mission id. A
retried trigger therefore loses the create (-> "duplicate") and changes nothing else.

Ordering. Each user has a queue ordered by priority (urgent > high > medium > low), then deadline
(earliest first, none last), then arrival (first come, first served).

Claims. A queued mission starts only after a *claim*: one atomic step that deletes its queue entry
(only if it is still there) and adds its id to the user's running set (only if the set holds
fewer than `limit` ids, or already holds this one). The suggested split into acquire-then-remove
leaks slots: a drainer holding a stale head can acquire a slot for a mission that another drainer
already started and that has since finished; its remove then fails and nobody releases that
slot. One atomic claim has no such window (DynamoDB: one TransactWriteItems).

A new mission with nothing of its user's queued ahead of it skips the queue: its submit adds its id to the
running set itself (one conditional write, the same size condition) and starts it. No claim is needed:
a mission without a queue entry can be started by nobody else. That is 4 writes of this store per mission
(note, slot, forget, release) instead of 11 (a claim is a transaction: 2 units an item).

Waiting for a human holds no slot (as in Inngest): when a mission asks a question its slot is
released (`waiting`), and the answer does not resume it directly but is queued as a *resume* entry
(`resume`), which a claim starts like any other, so a user's running missions never exceed the limit,
and three unanswered questions cannot block that user's next mission for days.

Why the running set holds mission ids rather than a count: releasing an id is idempotent
(`finished` may be delivered twice), and a slot always belongs to a known mission.

Safety (never more than `limit` running per user). A mission starts only after its claim put its
id in the set under the size condition, and its id leaves the set only when its execution ended
(`finished`) or its start failed. So the started-and-not-ended missions are a subset of the set,
whose size a claim never pushes past `limit`.

Exactly once. A mission has one queue entry (only the submit that created its record enqueues
it), the entry is deleted by exactly one successful claim, and only the claimer starts it; or it has none,
and only its submit starts it.

Liveness (no request is stranded while a slot is free). Every enqueue and every release is
followed by a drain, and a drain stops only when
  (a) it saw the queue empty (a consistent read), or holding only the entry it then claimed: a later
      enqueue runs its own drain; or
  (b) it saw the running set full (a read, or a failed claim): each of those missions is released
      later (it ends, or its start fails), and each release is followed by a drain that reads the
      queue afresh.
A claim that finds its entry gone (another drainer took it) never stops a drain. So whenever the
queue is not empty and a slot is free, a drain is running or about to run.
This assumes `finished` is eventually called for every started mission.

Crashes (nothing lost). A process may die anywhere, and three places would strand a request: after
recording a mission and before queueing it (a queued record nobody will start: a retried trigger
is a "duplicate" and changes nothing), after queueing it and before the drain that follows, and
after a claim and before the start is done (a slot held
by a mission that never started). So the store keeps a journal: `submit` notes the request
(`intend`) before it records the mission and forgets it once it is queued and drained, and a claim keeps the
entry (as a claim) until `settle`, after the start. Whatever is still in the journal long after it
was written (`reconcile`, run on a schedule; longer than any function runs) was left by a process
that died, and the reconciler finishes it: it queues the recorded request, starts (or resumes) the
claimed mission, or frees the slot of one that can no longer start. A submit that took its slot itself
leaves its note: a mission still queued is queued (its claim finds its id in the set already), one marked
running without an execution is started, and one that ended or never was frees its slot. Starting is idempotent by name
(the execution is named after the mission), so a start that did happen is not made twice.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from missions.core.errors import ConflictError, MissionRequestError, NotFound, TaskGone, TransitionRefused
from missions.core.mission.envelope import Envelope, new_id
from missions.core.mission.requests import MissionRequest
from missions.core.mission.status import TERMINAL, MissionStatus
from missions.core.triggers.declared import Priority
from missions.ports.dispatch import HOLD_REASONS, NO_DEADLINE, Claim, DispatchStore, QueueEntry, ResumeTicket
from missions.ports.missions import MissionRecord, MissionStore
from missions.service.lifecycle import Lifecycle

log = logging.getLogger(__name__)


def mission_id_for(request: MissionRequest) -> str:
    """The request's own id, else one derived from its idempotency key, else a fresh one.

    The key is scoped by user: a key repeated by another user (a schedule tick fanned out to every
    opted-in user, say) is a different mission, not a duplicate.
    """
    if request.mission_id:
        return request.mission_id
    if request.idempotency_key:
        digest = hashlib.sha256(f"{request.user_id}\n{request.idempotency_key}".encode()).hexdigest()
        return "m_" + digest[:20]
    return new_id("m_")


def deadline_key(deadline: str | None) -> str:
    """A deadline as a fixed-width UTC string, so that string order is time order (naive = UTC)."""
    if deadline is None:
        return NO_DEADLINE
    try:
        moment = datetime.fromisoformat(deadline.strip())
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        moment = moment.astimezone(UTC)
    except (ValueError, OverflowError):
        raise MissionRequestError(f"deadline: not an ISO 8601 date-time: {deadline!r}") from None
    return f"{moment.year:04d}-" + moment.strftime("%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class DispatchResult:
    """What `submit` did: "started" by this call, "queued" (not started by this call; another drain
    may start it at any moment), or "duplicate" (the mission id existed: nothing changed)."""

    mission_id: str
    status: Literal["started", "queued", "duplicate"]
    held: str | None = None  # queued, and held out of the queue for this reason until it is released
    replaced: str | None = None  # the active mission of its key it replaced (missions.service.flow.multitask)


@dataclass
class Reconciled:
    """What `reconcile` did, by mission id."""

    queued: list[str] = field(default_factory=list)  # recorded, never queued: queued now
    started: list[str] = field(default_factory=list)  # claimed, perhaps never started: started (or resumed) now
    released: list[str] = field(default_factory=list)  # claimed, can no longer start: its slot freed
    dropped: list[str] = field(default_factory=list)  # nothing left to do (its record never written, or it went on)
    failures: dict[str, str] = field(default_factory=dict)  # tried again at the next run

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Starter(Protocol):
    """What the dispatcher hands a claimed mission to; the record exists and is marked running first."""

    def start(self, request: MissionRequest, prepared: Envelope | None = None) -> None:
        """Start the mission's execution, named after `request.mission_id` (so a second start of it does not
        run it twice). `prepared`: its first envelope, when the submit that is starting it built one."""

    def resume(self, entry: QueueEntry) -> None:
        """Hand a claimed answer (or a paused mission's resume) to its waiting execution; TransitionRefused
        once the mission was cancelled, TaskGone when the execution no longer takes it."""

    def redeliver(self, entry: QueueEntry) -> None:
        """Hand an answer over again after a crash between marking the mission running and handing it over."""


class _StopDraining(Exception):
    """A dependency refused a hand-over: draining on would only meet it again."""


class Dispatcher:
    """Submits requests, and starts queued missions as slots free up (see the module docstring).

    `starter` starts (or resumes) what a claim took. `limit` is a number or a function of the user.
    """

    def __init__(
        self,
        store: DispatchStore,
        missions: MissionStore,
        starter: Starter,
        limit: int | Callable[[str], int] = 3,
        clock: Callable[[], int] = time.time_ns,
        start_failed: Callable[[MissionRecord], object] | None = None,
    ):
        self._store = store
        self._start_failed = start_failed
        self._missions = missions
        self._lifecycle = Lifecycle(missions)
        self._starter = starter
        self._limit = limit
        # Wall-clock, not monotonic: arrivals are compared across processes (Lambda instances), and a
        # monotonic clock means nothing outside its own host. Within a process they strictly increase.
        self._clock = clock
        self._last_arrival = 0
        self._arrival_lock = threading.Lock()

    def limit_for(self, user_id: str) -> int:
        return self._limit(user_id) if callable(self._limit) else self._limit

    def submit(
        self, request: MissionRequest, prepared: Envelope | None = None, hold: str | None = None
    ) -> DispatchResult:
        """Record, enqueue and drain. MissionRequestError (nothing written) for a bad deadline.

        `prepared`: the mission's first envelope, built by the caller as it checked the request; handed
        to the start when this call's own drain starts the mission, so it is not built twice. `hold`: why it
        may not start yet (HOLD_REASONS): recorded queued and held out of the queue until `release`."""
        mission_id = mission_id_for(request)
        deadline = deadline_key(request.deadline)
        request = request.model_copy(update={"mission_id": mission_id})
        entry = QueueEntry(
            user_id=request.user_id,
            mission_id=mission_id,
            rank=request.priority.rank,
            deadline=deadline,
            arrival=self._arrival(),
            request=request,
            held=hold,
        )
        self._store.intend(entry)  # from here a crash leaves a note the reconciler finishes
        try:
            self._lifecycle.queued(
                MissionRecord(
                    mission_id=mission_id,
                    user_id=request.user_id,
                    capability=request.capability,
                    goal=request.goal,
                    priority=request.priority.value,
                    trigger=request.trigger.value,
                    forked_from=request.fork_of.model_dump(mode="json", exclude_defaults=True)
                    if request.fork_of is not None
                    else None,
                    parent=request.parent.model_dump(include={"mission_id", "interrupt_id"})
                    if request.parent is not None
                    else None,
                    lineage=request.parent.lineage if request.parent is not None else [],
                    flow_key=request.flow_key(),
                )
            )
        except ConflictError:
            self._store.forget(entry)
            return DispatchResult(mission_id, "duplicate")
        try:
            # nothing of its user's waits ahead of it: it takes a free slot itself, without a queue entry or a
            # claim (nobody else can start a mission that has no entry; its note covers a crash before its start)
            took = hold is None and not self._store.front(request.user_id, 1)
            took = took and self._store.take_slot(request.user_id, mission_id, self.limit_for(request.user_id))
        except Exception:
            self._missions.discard(mission_id)  # no record without its slot or its queue entry
            self._store.forget(entry)
            raise
        if took:
            try:
                launched = self._launch(entry, own=True, prepared=prepared)
            finally:
                self._store.forget(entry)
            return DispatchResult(mission_id, "started" if launched else "queued")
        try:
            if hold is not None:
                self._store.hold(entry)
            else:
                self._store.enqueue(entry)
        except Exception:
            self._missions.discard(mission_id)  # no record without its queue entry: nothing half-made
            self._store.forget(entry)
            raise
        if hold is not None:  # nothing to drain: a held entry starts only once `release` queues it
            self._store.forget(entry)
            return DispatchResult(mission_id, "queued", held=hold)
        try:
            started = self._drain(request.user_id, own=mission_id, prepared=prepared)
        finally:  # kept until the drain is done: a queued entry nobody drains would wait for the next event
            self._store.forget(entry)
        return DispatchResult(mission_id, "started" if mission_id in started else "queued")

    def resume(self, mission_id: str, ticket: ResumeTicket, record: MissionRecord | None = None) -> DispatchResult:
        """Queue the answer that resumes a waiting mission; "started" when it was handed over at once.
        `record`: the mission's, when the caller has just read it (what is used of it never changes)."""
        record = record if record is not None and record.mission_id == mission_id else self._missions.get(mission_id)
        request = MissionRequest(
            capability=record.capability,
            goal=record.goal,
            user_id=record.user_id,
            mission_id=mission_id,
            priority=Priority(record.priority),
        )
        entry = QueueEntry(
            user_id=record.user_id,
            mission_id=mission_id,
            rank=request.priority.rank,
            arrival=0,
            request=request,
            resume=ticket,
        )
        self._store.intend(entry)  # a crash before the drain is done leaves the answer to the reconciler
        self._store.enqueue(entry)
        try:
            resumed = self.drain(record.user_id, own=mission_id)
        finally:
            self._store.forget(entry)
        return DispatchResult(mission_id, "started" if mission_id in resumed else "queued")

    def waiting(self, mission_id: str, user_id: str | None = None) -> list[str]:
        """The mission waits for a human: its slot goes to the next one (its answer queues for a slot)."""
        return self.finished(mission_id, user_id)

    def drain(self, user_id: str, own: str | None = None) -> list[str]:
        """Start the user's queued missions while slots are free; returns the ids this call started.

        A consistent read of the running set first: a full set ends the drain as a failed claim
        would (the liveness argument is the same), for a read instead of a cancelled transaction.
        `own` is the mission the caller is waiting on: if its start fails, nothing of it is kept and
        the error reaches the caller (who answers it), instead of a failed mission nobody asked for.
        """
        return self._drain(user_id, own)

    def _drain(self, user_id: str, own: str | None = None, prepared: Envelope | None = None) -> list[str]:
        """`drain`; `prepared` is `own`'s first envelope, when the caller built it."""
        started: list[str] = []
        while True:
            # the head and whether anything follows it: a queue of one needs no read after its claim
            front = self._store.front(user_id, 2)
            if not front:
                return started
            entry = front[0]
            limit = self.limit_for(user_id)
            running = self._store.running(user_id)
            if len(running) >= limit and entry.mission_id not in running:
                return started
            outcome = self._store.claim(entry, limit)
            if outcome is Claim.FULL:
                return started
            if outcome is not Claim.CLAIMED:
                continue
            try:
                mine = entry.mission_id == own
                if self._launch(entry, own=mine, prepared=prepared if mine else None):
                    started.append(entry.mission_id)
            except _StopDraining:
                return started
            finally:
                self._store.settle(entry)  # started, or never will be: no longer the reconciler's
            if len(front) == 1:
                return started  # the queue held only this one: what was queued since has its own drain
            # GONE, or more entries behind it: read the head again

    def finished(self, mission_id: str, user_id: str | None = None) -> list[str]:
        """An execution ended (may be called more than once): free its slot, start the next ones.
        `user_id`: its user, when the caller has just read or written its record (else it is read)."""
        if user_id is None:
            try:
                user_id = self._missions.get(mission_id).user_id
            except NotFound:
                log.warning("finished: unknown mission %s", mission_id)
                return []
        self._store.release(user_id, mission_id)
        return self.drain(user_id)

    def _launch(self, entry: QueueEntry, own: bool = False, prepared: Envelope | None = None) -> bool:
        """Start (or resume) a claimed mission. On failure its slot is freed (the caller's drain loop then
        goes on, which is the drain that follows this release); a start that fails is recorded as the
        mission's failure, unless the caller waits on it (`own`): then nothing is kept and it raises."""
        if entry.resume is not None:
            return self._hand_over(entry, own)
        try:
            self._lifecycle.start(entry.mission_id)  # refused when the user cancelled it while it was queued
        except (TransitionRefused, NotFound) as exc:
            log.info("mission %s not started: %s", entry.mission_id, exc)
            self._store.release(entry.user_id, entry.mission_id)
            return False
        try:
            self._starter.start(entry.request, prepared)
            return True
        except Exception as exc:
            self._store.release(entry.user_id, entry.mission_id)
            if own:
                self._missions.discard(entry.mission_id)
                raise
            log.warning("start of mission %s failed: %s", entry.mission_id, exc)
            try:
                failed = self._lifecycle.move(
                    entry.mission_id, MissionStatus.FAILED, terminal_reason=f"start_failed: {exc}"[:500]
                )
                if self._start_failed is not None:
                    self._start_failed(failed)
            except Exception:
                log.exception("could not mark mission %s failed (or say so)", entry.mission_id)
            return False

    def _hand_over(self, entry: QueueEntry, own: bool) -> bool:
        """Resume a claimed, answered mission; a cancelled one is skipped (the resume refuses it)."""
        try:
            self._starter.resume(entry)
            return True
        except TransitionRefused as exc:
            log.info("mission %s not resumed: %s", entry.mission_id, exc)
            self._store.release(entry.user_id, entry.mission_id)
            return False
        except TaskGone as exc:  # the execution no longer takes it (it timed out): nothing to hand over
            self._store.release(entry.user_id, entry.mission_id)
            if own:
                raise
            log.warning("mission %s no longer takes its answer: %s", entry.mission_id, exc)
            return False
        except Exception as exc:
            self._store.release(entry.user_id, entry.mission_id)
            if own:
                raise
            # an outage: the answer goes back in line and this drain stops (the next one retries it)
            log.warning("resume of mission %s failed, queued again: %s", entry.mission_id, exc)
            self._store.enqueue(entry)
            raise _StopDraining from exc

    def reconcile(self, before: int) -> Reconciled:
        """Finish what processes that died left half-done (see "Crashes" in the module docstring):
        every note and claim made before `before` (nanoseconds since the epoch), then a drain for
        each user touched. A step that fails is reported and left for the next run."""
        report = Reconciled()
        users: set[str] = set()
        for item in self._store.stranded(before):
            entry = item.entry
            try:
                if item.kind == "pending":
                    self._requeue(entry, report)
                else:
                    self._restart(entry, report)
            except Exception as exc:
                log.warning("reconcile of mission %s failed: %s", entry.mission_id, exc)
                report.failures[entry.mission_id] = f"{type(exc).__name__}: {exc}"[:500]
            users.add(entry.user_id)
        for user_id in sorted(users):
            try:
                self.drain(user_id)
            except Exception as exc:
                report.failures[f"drain:{user_id}"] = f"{type(exc).__name__}: {exc}"[:500]
        return report

    def _requeue(self, entry: QueueEntry, report: Reconciled) -> None:
        """A request (or an answer) noted and perhaps never queued: queue it if its mission was recorded
        and still waits for it."""
        try:
            record = self._missions.get(entry.mission_id)
        except NotFound:  # its submit died before recording it: the caller was never told it exists
            record = None
        if entry.resume is None and (record is None or record.status in TERMINAL):
            # a submit that took its slot itself (no queue entry, no claim) died, and the mission never started
            # or was cancelled since: a terminal mission holds no slot
            if entry.mission_id in self._store.running(entry.user_id):
                self._store.release(entry.user_id, entry.mission_id)
                report.released.append(entry.mission_id)
            else:
                report.dropped.append(entry.mission_id)
            self._store.forget(entry)
            return
        if entry.resume is None and record is not None and record.status == MissionStatus.RUNNING:
            if not record.execution_arn:  # ... or died around its start, which is idempotent by name
                self._starter.start(entry.request)
                report.started.append(entry.mission_id)
            else:
                report.dropped.append(entry.mission_id)
            self._store.forget(entry)
            return
        if entry.resume is None:
            waits = record is not None and record.status == MissionStatus.QUEUED
        else:
            waits = record is not None and entry.resume.awaited_by(
                record.status, record.pending_interrupt, record.pause_id
            )
        if waits and not self._store.placed(entry):
            if entry.held is not None:  # held still: the next release queues it
                self._store.hold(entry)
            else:
                self._store.enqueue(entry)
            report.queued.append(entry.mission_id)
        else:  # never recorded, or queued (the drain that follows the reconcile starts it), or it went on
            report.dropped.append(entry.mission_id)
        self._store.forget(entry)

    def _restart(self, entry: QueueEntry, report: Reconciled) -> None:
        """A claim never settled: its claimer died around the start. Start it (or hand the answer over)
        if it has not been, free its slot if it can no longer run, and settle the claim."""
        try:
            record = self._missions.get(entry.mission_id)
        except NotFound:
            record = None
        if record is None or record.status in TERMINAL:
            # it ended, or was cancelled before it started: a terminal mission holds no slot
            self._store.release(entry.user_id, entry.mission_id)
            report.released.append(entry.mission_id)
        elif entry.resume is None and record.status == MissionStatus.QUEUED:
            if self._launch(entry):
                report.started.append(entry.mission_id)
            else:
                report.released.append(entry.mission_id)
        elif entry.resume is None and record.status == MissionStatus.RUNNING and not record.execution_arn:
            self._starter.start(entry.request)  # idempotent by name: an execution that did start is kept
            report.started.append(entry.mission_id)
        elif entry.resume is not None and entry.resume.awaited_by(
            record.status, record.pending_interrupt, record.pause_id
        ):
            try:
                if self._hand_over(entry, own=False):
                    report.started.append(entry.mission_id)
                else:
                    report.released.append(entry.mission_id)
            except _StopDraining as stop:  # an outage: the answer went back in line, where a drain retries it
                report.failures[entry.mission_id] = f"answer queued again: {stop.__cause__}"[:500]
        elif entry.resume is not None and record.status == MissionStatus.RUNNING:
            self._starter.redeliver(entry)  # marked running, perhaps not handed over: a second delivery is refused
            report.started.append(entry.mission_id)
        else:
            report.dropped.append(entry.mission_id)  # it went on: started, or asked its next question
        self._store.settle(entry)

    def queued(self, user_id: str) -> list[QueueEntry]:
        """The user's queue, first to run first."""
        return self._store.queued(user_id)

    def running(self, user_id: str) -> set[str]:
        """The missions holding the user's running slots."""
        return self._store.running(user_id)

    def cancel_queued(self, user_id: str, mission_id: str) -> bool:
        """Take a queued (or held) mission out of its user's queue; False when no entry is left (a claim took it)."""
        for entry in [*self._store.queued(user_id), *self.held(user_id)]:
            if entry.mission_id == mission_id:
                return self._store.remove(entry)
        return False

    def held(self, user_id: str) -> list[QueueEntry]:
        """The user's missions held out of the queue, for every reason."""
        return [entry for reason in HOLD_REASONS for entry in self._store.held(reason, user_id)]

    def held_for(self, reason: str, user_id: str | None = None) -> list[QueueEntry]:
        """The missions held for `reason`: the user's, or everyone's grouped by user."""
        return self._store.held(reason, user_id)

    def release(self, reason: str, may_start: Callable[[str], bool], user_id: str | None = None) -> list[str]:
        """Queue the entries held for `reason` (the user's, or everyone's) of each user `may_start` now admits,
        then drain that user's queue; returns the ids this call started."""
        started: list[str] = []
        by_user: dict[str, list[QueueEntry]] = {}
        for entry in self._store.held(reason, user_id):
            by_user.setdefault(entry.user_id, []).append(entry)
        for user, entries in by_user.items():
            if may_start(user):
                started += self.release_entries(user, entries)
        return started

    def release_entries(self, user_id: str, entries: list[QueueEntry]) -> list[str]:
        """Queue these held entries of the user, then drain the user's queue; returns the ids started. Each is
        noted first, like a submit, so a crash between the move and the drain leaves the reconciler a note."""
        for entry in entries:  # held or queued, the note finds it placed: the reconciler's drain follows
            self._store.intend(entry)
        try:
            for entry in entries:
                self._store.unhold(entry)  # False: cancelled or released meanwhile
            return self.drain(user_id)
        finally:
            for entry in entries:
                self._store.forget(entry)

    def rehold(self, entry: QueueEntry, reason: str) -> None:
        """Hold a held entry for another reason (its key's turn came, its user's budget is spent)."""
        moved = entry.model_copy(update={"held": reason})
        self._store.intend(moved)
        try:
            self._store.hold(moved)
            self._store.remove(entry)
        finally:
            self._store.forget(moved)

    def _arrival(self) -> int:
        with self._arrival_lock:
            self._last_arrival = max(self._clock(), self._last_arrival + 1)
            return self._last_arrival
