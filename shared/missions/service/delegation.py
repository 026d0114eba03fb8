"""Delegation: a stage hands part of its work to another capability's mission, and gets its result.

A stage calls `ctx.delegate(capability, goal, Output, context=...)` (missions.core.capability.stages). Its
attempt ends with an interrupt of kind `delegation`, and the mission's machine waits on a task token as
it does for a question: no compute, and none of its user's running slots (so the child never waits
behind its own parent). The interrupt function hands the delegation here (`start`), which starts the
child through the launcher like any mission (the user's limit and priorities apply; its id follows from
the parent's interrupt, so a retried interrupt function starts it once), within what is left of the
parent's cost bound, linked both ways (`parent` and `lineage` on the child's record, `children` on the
parent's). When the child ends, however it ends (`ended`: its execution's end, or its cancel before it
started), its outcome answers the parent's interrupt, exactly once (the answer is a conditional write),
and the parent resumes: the stage runs again with what it did before replayed, `ctx.delegate` returns
the child's output as the model asked for (or raises DelegationFailed), and the child's spend is added
to the parent's.

Refused with a reason, which resumes the parent at once with status `refused`: a capability already in
the lineage (a cycle), a depth over `max_depth`, no budget left, a capability the launcher refuses.
Cancelling a parent cancels its children; pausing one that waits on a child pauses the child
(missions.service.control).
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import TYPE_CHECKING, Any

from missions.core.capability import registry as registry
from missions.core.errors import ConflictError, MissionRequestError, NotFound
from missions.core.mission.envelope import InterruptKind, InterruptResponse, Resume
from missions.core.mission.events import Event, EventType
from missions.core.mission.requests import MissionRequest, ParentLink
from missions.core.mission.status import TERMINAL
from missions.core.triggers.declared import TriggerSource
from missions.ports.events import EventStore
from missions.ports.interrupts import InterruptRecord, InterruptStore
from missions.ports.missions import MissionRecord, MissionStore

if TYPE_CHECKING:
    from missions.service.launcher import Launcher

log = logging.getLogger(__name__)

MAX_DEPTH = 3  # sub-missions of sub-missions: a chain longer than this is refused


class Delegations:
    def __init__(
        self,
        *,
        missions: MissionStore,
        interrupts: InterruptStore,
        events: EventStore,
        launcher: Launcher,
        capabilities: registry.Registry,
        max_depth: int = MAX_DEPTH,
    ):
        self._missions = missions
        self._interrupts = interrupts
        self._events = events
        self._launcher = launcher
        self._capabilities = capabilities
        self._max_depth = max_depth

    # -- a stage delegates ---------------------------------------------------------------------------

    def start(self, parent: MissionRecord, interrupt: InterruptRecord, envelope: dict[str, Any]) -> str | None:
        """Start the child the interrupt asks for (its parent waits already); the child's id, or None when
        the delegation was refused (the parent then resumes at once with the reason)."""
        capability = str(interrupt.data.get("capability") or "")
        lineage = [*parent.lineage, parent.capability]
        try:
            request = self._request(parent, interrupt, envelope, capability, lineage)
        except MissionRequestError as refused:
            self._resume_parent(parent.mission_id, interrupt, capability, None, "refused", str(refused), 0.0)
            return None
        # linked before it starts: a pause or cancel of the parent finds a child that is already running
        child = str(request.mission_id)
        if child not in parent.children:
            self._missions.update(parent.mission_id, children=[*parent.children, child])
        try:
            result = self._launcher.submit(request)
        except MissionRequestError as refused:
            self._missions.update(parent.mission_id, children=[c for c in parent.children if c != child])
            self._resume_parent(parent.mission_id, interrupt, capability, None, "refused", str(refused), 0.0)
            return None
        self._event(
            parent.mission_id,
            f"delegated-{interrupt.interrupt_id}",
            EventType.DELEGATION_STARTED,
            interrupt.stage,
            child=child,
            capability=capability,
            goal=request.goal,
            status=result.status,
        )
        return child

    def _request(
        self,
        parent: MissionRecord,
        interrupt: InterruptRecord,
        envelope: dict[str, Any],
        capability: str,
        lineage: list[str],
    ) -> MissionRequest:
        if capability in lineage:
            raise MissionRequestError(f"a delegation cycle: {' -> '.join([*lineage, capability])}")
        if len(lineage) > self._max_depth:
            chain = " -> ".join([*lineage, capability])
            raise MissionRequestError(f"too deep: {chain} is over the {self._max_depth} levels of sub-missions allowed")
        try:
            ceiling = self._capabilities.load(capability).pipeline.bounds.max_cost_usd
        except registry.UnknownCapability as exc:
            raise MissionRequestError(str(exc)) from None
        bounds, counters = envelope.get("bounds") or {}, envelope.get("counters") or {}
        left = float(bounds.get("max_cost_usd") or 0) - float(counters.get("cost_usd") or 0)
        if left <= 0:
            raise MissionRequestError(
                f"no budget left for a sub-mission (the mission spent {counters.get('cost_usd')})"
            )
        return MissionRequest.parse(
            capability=capability,
            goal=str(interrupt.data.get("goal") or interrupt.question),
            context=interrupt.data.get("context") or {},
            user_id=parent.user_id,
            priority=parent.priority,
            trigger=TriggerSource.DELEGATION,
            idempotency_key=f"delegation:{parent.mission_id}:{interrupt.interrupt_id}",
            # the same child for a retried interrupt function (the id is the execution's name: one start)
            mission_id="m_" + hashlib.sha256(f"{parent.mission_id}/{interrupt.interrupt_id}".encode()).hexdigest()[:20],
            bounds={"max_cost_usd": round(min(left, ceiling), 8)},
            parent=ParentLink(mission_id=parent.mission_id, interrupt_id=interrupt.interrupt_id, lineage=lineage),
        )

    # -- a child ends --------------------------------------------------------------------------------

    def ended(self, child: MissionRecord) -> bool:
        """Hand a child's end to its parent (any mission may be given: one without a parent is ignored).
        True when this call delivered it; False when it had been, or the parent no longer waits for it."""
        if child.parent is None or child.status not in TERMINAL:
            return False
        parent_id, interrupt_id = child.parent["mission_id"], child.parent["interrupt_id"]
        try:
            interrupt = self._interrupts.get(parent_id, interrupt_id)
        except NotFound:
            log.warning(
                "sub-mission %s ended, but its parent %s has no interrupt %s", child.mission_id, parent_id, interrupt_id
            )
            return False
        if interrupt.status != "pending":
            return False  # delivered already, or the parent was cancelled or timed out meanwhile
        result = child.result or {}
        reason = child.terminal_reason or str(child.status)
        errors = result.get("errors") if child.status != "completed" else None
        if isinstance(errors, list) and errors and isinstance(errors[-1], dict):
            reason = f"{reason}: {errors[-1].get('message', '')}"[:1000]
        return self._resume_parent(
            parent_id,
            interrupt,
            child.capability,
            child.mission_id,
            str(child.status),
            reason,
            child.cost_usd,
            result.get("output") if child.status == "completed" else None,
        )

    def _resume_parent(
        self,
        parent_id: str,
        interrupt: InterruptRecord,
        capability: str,
        child: str | None,
        status: str,
        reason: str,
        cost_usd: float,
        output: Any = None,
    ) -> bool:
        """Answer the parent's delegation with the child's outcome (once: the answer is conditional) and hand
        it to its execution (at once when its user has a running slot free, else queued for one)."""
        response = InterruptResponse(
            data={
                "child": child,
                "capability": capability,
                "status": status,
                "reason": reason,
                "output": output,
                "cost_usd": cost_usd,
            }
        )
        try:
            answered = self._interrupts.answer(parent_id, interrupt.interrupt_id, response)
        except ConflictError:
            return False
        self._event(
            parent_id,
            f"delegation-ended-{interrupt.interrupt_id}",
            EventType.DELEGATION_ENDED,
            interrupt.stage,
            child=child,
            capability=capability,
            status=status,
            reason=reason,
            cost_usd=cost_usd,
        )
        output_json = json.dumps(Resume(interrupt_id=interrupt.interrupt_id, response=response).model_dump(mode="json"))
        try:
            self._launcher.resume(answered, output_json)
        except Exception:
            # not handed over: the answer is taken back so that a retry of this end (or the reconciler) can give it
            self._interrupts.reopen(parent_id, interrupt.interrupt_id)
            raise
        return True

    def children_of(self, parent: MissionRecord) -> list[MissionRecord]:
        """The parent's children that have not ended, as their records are now."""
        found = []
        for child in parent.children:
            try:
                record = self._missions.get(child)
            except NotFound:
                continue
            if record.status not in TERMINAL:
                found.append(record)
        return found

    def _event(self, mission_id: str, batch: str, kind: EventType, stage: str | None, **payload: Any) -> None:
        self._events.append(mission_id, batch, [Event(type=kind, mission_id=mission_id, stage=stage, payload=payload)])


def is_delegation(interrupt: InterruptRecord) -> bool:
    return interrupt.kind is InterruptKind.DELEGATION


__all__ = ["MAX_DEPTH", "Delegations", "is_delegation"]
