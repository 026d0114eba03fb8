"""The dispatcher's storage port: per-user priority queues and running sets (see missions.service.dispatch)."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, Protocol

from pydantic import Field

from missions.core.cost.budget import HELD_FOR_BUDGET
from missions.core.mission.envelope import Model
from missions.core.mission.requests import MissionRequest

NO_DEADLINE = "9999-12-31T23:59:59.999999Z"  # sorts after every real deadline
HELD_FOR_KEY = "key"  # behind the active mission of its conversation or concurrency key (missions.service.flow)
HOLD_REASONS = (HELD_FOR_BUDGET, HELD_FOR_KEY)  # why an entry may be held out of its user's queue


class ResumeTicket(Model):
    """An answered question (or a paused mission's resume) waiting for a running slot: what to hand the
    execution when it gets one."""

    interrupt_id: str  # the question answered, or the pause (`pause_id`) resumed
    task_token: str
    output: str  # the Resume document (an answer), or the notes (a resume), as JSON
    kind: Literal["answer", "unpause"] = "answer"

    def awaited_by(self, status: str, pending_interrupt: str | None, pause_id: str | None) -> bool:
        """Whether a mission in this state still waits for this very ticket."""
        if self.kind == "unpause":
            return status == "paused" and pause_id == self.interrupt_id
        return status == "interrupted" and pending_interrupt == self.interrupt_id


class QueueEntry(Model):
    """A queued mission: the request to start (or, with `resume`, the answer that resumes it), and where
    it sits in its user's queue."""

    user_id: str
    mission_id: str
    rank: int  # Priority.rank: lower runs first
    deadline: str = NO_DEADLINE  # deadline_key()
    arrival: int  # nanoseconds since the epoch; 0 for a resume, which goes before new starts of its rank
    request: MissionRequest
    resume: ResumeTicket | None = None
    # why it is held out of the queue (HELD_FOR_BUDGET): it is not claimed until `unhold` queues it
    held: str | None = Field(None, pattern=r"^[a-z_]{1,32}$")

    @property
    def sort_key(self) -> str:
        """Priority, then deadline, then arrival, then mission id (a total order)."""
        return f"{self.rank}#{self.deadline}#{self.arrival:020d}#{self.mission_id}"


class Claim(StrEnum):
    CLAIMED = "claimed"  # the entry is ours and its mission holds a slot: start it
    FULL = "full"  # the user's running set is full: stop draining
    GONE = "gone"  # another drainer claimed (or someone removed) the entry: read the head again


class Stranded(Model):
    """A request some process left half-handled, perhaps because it died: "pending" was noted before
    its mission record was written and never queued; "claimed" took a slot and was perhaps never
    started. `since` is when it was noted or claimed (nanoseconds since the epoch)."""

    kind: Literal["pending", "claimed"]
    entry: QueueEntry
    since: int


class DispatchStore(Protocol):
    """Per-user priority queues and running sets, and the journal that lets a reconciler finish what a
    crashed process left half-done (`intend`, claims kept until `settle`). Every method is atomic."""

    def intend(self, entry: QueueEntry) -> None:
        """Note a request about to be recorded and queued (kept until `forget`)."""

    def forget(self, entry: QueueEntry) -> None:
        """Drop the note `intend` made (idempotent)."""

    def enqueue(self, entry: QueueEntry) -> None:
        """Add the entry (idempotent: the same sort key is one entry)."""

    def front(self, user_id: str, count: int) -> list[QueueEntry]:
        """The first `count` entries of the user's queue, in order (a consistent read); [] when it is empty."""

    def claim(self, entry: QueueEntry, limit: int) -> Claim:
        """Atomically move the entry from the queue to the claims (kept until `settle`) and add its
        mission id to the user's running set, only if the entry is queued and the set holds fewer
        than `limit` ids or already holds this one. GONE wins over FULL when both conditions fail."""

    def take_slot(self, user_id: str, mission_id: str, limit: int) -> bool:
        """Add the id to the user's running set if the set holds fewer than `limit` ids (or already holds
        it), in one conditional write; False (nothing written) when it is full. For a mission that has no
        queue entry: nobody else can start it, so it needs no claim."""

    def settle(self, entry: QueueEntry) -> None:
        """The claimed entry was started, or will never be: drop its claim (idempotent)."""

    def placed(self, entry: QueueEntry) -> bool:
        """Whether the entry is queued, held (when its `held` says so) or claimed."""

    def stranded(self, before: int) -> list[Stranded]:
        """Notes and claims made before `before` (nanoseconds since the epoch) and still kept, oldest first."""

    def release(self, user_id: str, mission_id: str) -> None:
        """Remove the id from the user's running set (idempotent)."""

    def remove(self, entry: QueueEntry) -> bool:
        """Delete a queued (or, with `held`, a held) entry (a cancellation); True only for the caller that
        deleted it."""

    def hold(self, entry: QueueEntry) -> None:
        """Keep the entry (its `held` names why) out of the queue, where no claim sees it (idempotent)."""

    def held(self, reason: str, user_id: str | None = None) -> list[QueueEntry]:
        """The entries held for `reason` (the user's, or everyone's grouped by user), each user's in queue order."""

    def unhold(self, entry: QueueEntry) -> bool:
        """Atomically move a held entry into its user's queue (`held` cleared); False when it is no longer
        held (another release or a cancellation took it)."""

    def key_holder(self, user_id: str, key: str) -> str | None:
        """The mission holding the user's key (MissionRequest.flow_key), None when none does."""

    def take_key(self, user_id: str, key: str, mission_id: str, expected: str | None) -> bool:
        """Make the mission the key's holder, only if its holder is `expected` (None: it has none); False when
        another holds it."""

    def drop_key(self, user_id: str, key: str, mission_id: str) -> bool:
        """Free the key, only if the mission holds it; False otherwise."""

    def running(self, user_id: str) -> set[str]:
        """The ids holding the user's slots (a consistent read)."""

    def queued(self, user_id: str) -> list[QueueEntry]:
        """The user's queue, first to run first."""
