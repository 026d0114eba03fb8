"""A user's own data: everything stored about them, exported as JSON lines or erased.

Erasure, in an order that keeps it safe to stop and run again at any point:
1. every mission of the user that has not ended is cancelled through the one owner of its status
   (missions.service.control), so no execution writes for it after its data is gone; one that cannot be
   cancelled is left whole (its record too) and reported;
2. email notices are stopped (their subscription is named in the user's memory, erased below);
3. each store keyed by mission erases that share of the user's missions; then each store keyed by user;
4. the mission records last, and only when every store keyed by mission succeeded: the records are how a
   second run finds the missions whose data a failure left behind.
Every store's failure is recorded with its reason and the others go on; the report says what was erased
and what was not (missions.core.accounts.ErasureReport).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence

from missions.core.accounts import ErasureReport, export_lines
from missions.core.errors import NotFound, TransitionRefused
from missions.core.mission.status import TERMINAL
from missions.ports.accounts import MissionIndex, PersonalStore
from missions.ports.missions import MissionRecord, MissionStore

log = logging.getLogger(__name__)

ERASED_REASON = "erased"  # the terminal reason of a mission cancelled by its user's erasure
NOTICES_KEPT_IN = "memory"  # the store that names a user's email subscription (missions.service.notifications)


class AccountService:
    def __init__(
        self,
        *,
        index: MissionIndex,
        missions: MissionStore,
        cancel: Callable[[MissionRecord, str], None],
        per_mission: Sequence[PersonalStore],
        per_user: Sequence[PersonalStore],
        stop_notices: Callable[[str], object] | None = None,
    ):
        self._index = index
        self._missions = missions
        self._cancel = cancel
        self._per_mission = tuple(per_mission)
        self._per_user = tuple(per_user)
        self._stop_notices = stop_notices

    def export(self, user_id: str) -> Iterator[str]:
        """JSON lines of everything stored about the user (missions.core.accounts.export_lines)."""
        ids = self._index.mission_ids(user_id)

        def records() -> Iterator[tuple[str, dict[str, object]]]:
            for store in (self._index, *self._per_mission, *self._per_user):
                yield from store.export(user_id, ids)

        return export_lines(user_id, records())

    def erase(self, user_id: str) -> ErasureReport:
        report = ErasureReport(user_id=user_id)
        try:
            ids = self._index.mission_ids(user_id)
        except Exception as exc:  # nothing is erased without knowing the missions first
            log.exception("erasure: missions of the user could not be listed")
            report.failed(self._index.name, f"its missions could not be listed ({_why(exc)}); nothing was erased")
            return report
        kept = self._stop_running(ids, report)
        ids = [m for m in ids if m not in kept]
        notices_stopped = True
        if self._stop_notices is not None:
            try:
                self._stop_notices(user_id)
            except Exception as exc:
                log.exception("erasure: email notices not stopped")
                report.failed("notifications", f"the email subscription could not be removed ({_why(exc)})")
                notices_stopped = False
        mission_stores_ok = all([self._erase(store, user_id, ids, report) for store in self._per_mission])
        for store in self._per_user:
            if store.name == NOTICES_KEPT_IN and not notices_stopped:  # it names the subscription to remove
                report.failed(store.name, "kept until the email subscription it names is removed")
                continue
            self._erase(store, user_id, ids, report)
        if mission_stores_ok:
            self._erase(self._index, user_id, ids, report)
        else:
            report.failed(self._index.name, "kept until every store of their missions' data is erased")
        return report

    def _stop_running(self, ids: Sequence[str], report: ErasureReport) -> set[str]:
        """Cancel every mission that has not ended; the ids of those that could not be stopped."""
        kept: set[str] = set()
        for mission_id in ids:
            try:
                record = self._missions.get(mission_id)
                if record.status not in TERMINAL:
                    self._cancel(record, ERASED_REASON)
            except (NotFound, TransitionRefused):
                continue  # gone, or ended meanwhile: nothing runs for it
            except Exception as exc:
                log.exception("erasure: mission not stopped", extra={"mission_id": mission_id})
                report.failed(f"mission {mission_id}", f"it could not be stopped ({_why(exc)}); kept whole")
                kept.add(mission_id)
        return kept

    @staticmethod
    def _erase(store: PersonalStore, user_id: str, ids: Sequence[str], report: ErasureReport) -> bool:
        try:
            report.count(store.name, store.erase(user_id, ids))
        except Exception as exc:  # recorded with its reason; the other stores go on
            log.exception("erasure: store not erased", extra={"store": store.name})
            report.failed(store.name, _why(exc))
            return False
        return True


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


__all__ = ["ERASED_REASON", "AccountService"]
