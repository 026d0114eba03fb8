"""SampleHome: the bundled sample home behind the HomeAssistant port, in memory.

The offline default: a mission runs with no Home Assistant and no token, against a house whose week
is known (`sample_data.dataset`, see `facts`). Each SampleHome is its own house: what a mission
changes (a light turned on, an automation saved) changes that instance only, so approval flows can
be tested and no mission sees another's changes. It answers as HA's REST API does, down to the
quirks worth keeping (history's first point is dated at the window's start; the logbook leaves out
meter readings; a service aimed at an unavailable entity succeeds and logs a warning).
"""

from __future__ import annotations

import bisect
import copy
import random
import threading
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from capabilities.home_assistant.dev import sample_registries, sample_statistics, templates
from capabilities.home_assistant.dev.automation_schema import release, validated_automation, validated_parts
from capabilities.home_assistant.dev.sample_dashboards import LovelaceCommands, SampleLovelace
from capabilities.home_assistant.dev.sample_data import (
    API_USER_ID,
    NEED_ATTRIBUTE_DOMAINS,
    REFERENCE_NOW,
    SEED,
    VERSION,
    Dataset,
    Entity,
    LogLine,
    Row,
    Run,
    SampleFacts,
    dataset,
    slugify,
    ulid,
)
from capabilities.home_assistant.dev.sample_services import SampleServices
from capabilities.home_assistant.ha.port import (
    ConfigCheck,
    HABadRequest,
    HAConfig,
    HAUnknownEntity,
    HistoryPoint,
    LogbookEntry,
    Registries,
    ServiceDomain,
    State,
    StateContext,
    StatisticPoint,
    StatisticsPeriod,
    automation_parts,
    entity_id_list,
    refusals,
    require_aware,
)
from capabilities.home_assistant.syntax import script_written_for, written_for

SIGNIFICANT_DOMAINS = frozenset({"climate", "device_tracker", "humidifier", "thermostat", "water_heater"})


class SampleHome(SampleServices, SampleLovelace):
    """The sample home, as a Home Assistant (implements `port.HomeAssistant`).

    `now`: when the week ends (default `sample_data.REFERENCE_NOW`); the same `now` always gives the
    same house. `config_errors`: what check_config should report (None: a valid configuration).
    `version`: the HA release it plays (`sample_data.VERSION` by default): what /api/config reports,
    the automation syntax its config API accepts on save, and how its automations and scripts are
    written (`automation_schema`).
    """

    def __init__(
        self, now: datetime | None = None, *, config_errors: str | None = None, version: str = VERSION
    ) -> None:
        release(version)  # refuses what is not a version before anything is built
        self.version = version
        self._data: Dataset = dataset(require_aware(now, "now") if now is not None else REFERENCE_NOW)
        self._config_errors = config_errors
        self._lock = threading.RLock()
        self._ticks = 0
        self._rng = random.Random(f"{SEED}:changes")
        self._entities: dict[str, Entity] = dict(self._data.entities)
        self._current: dict[str, State] = {e: self._initial_state(e) for e in self._entities}
        self._rows: dict[str, list[Row]] = {}  # rows this home's changes added (all after `now`)
        self._runs: list[Run] = []
        self._runs_by_id: dict[str, Run] = {}
        self._log: list[LogLine] = []
        self._automations: dict[str, dict[str, Any]] = {
            str(config["id"]): written_for(config, version) for config in self._data.automations
        }
        self._scripts: dict[str, dict[str, Any]] = {
            script_id: script_written_for(script, version) for script_id, script in self._data.scripts.items()
        }
        self._automation_entities: dict[str, str] = {
            str(entity.attributes["id"]): entity_id
            for entity_id, entity in self._entities.items()
            if entity.domain == "automation"
        }
        self._lovelace = LovelaceCommands()  # dashboards: none yet, as in a new HA
        self.notifications: list[dict[str, Any]] = []  # what notify.* and persistent_notification were asked to send

    # ------------------------------------------------------------------ what tests read

    @property
    def facts(self) -> SampleFacts:
        return self._data.facts

    @property
    def now(self) -> datetime:
        return self._data.now

    @property
    def areas(self) -> Mapping[str, str]:
        """Area id -> name (HA's REST API has no area endpoint: templates' areas() read these)."""
        return self._data.areas

    def area_of(self, entity_id: str) -> str | None:
        entity = self._entities.get(entity_id)
        return entity.area if entity else None

    # ------------------------------------------------------------------ the port

    def config(self) -> HAConfig:
        return HAConfig.model_validate({**copy.deepcopy(dict(self._data.config)), "version": self.version})

    def services(self) -> list[ServiceDomain]:
        return [ServiceDomain.model_validate(copy.deepcopy(dict(domain))) for domain in self._data.services]

    def states(self) -> list[State]:
        with self._lock:
            return [self._current[e].model_copy(deep=True) for e in sorted(self._current)]

    def state(self, entity_id: str) -> State:
        with self._lock:
            state = self._current.get(entity_id.lower())
            if state is None:
                raise HAUnknownEntity(f"Home Assistant has no entity '{entity_id}'", entity_id=entity_id)
            return state.model_copy(deep=True)

    def history(
        self,
        entity_ids: Sequence[str],
        start: datetime,
        end: datetime,
        *,
        minimal_response: bool = True,
        no_attributes: bool = True,
    ) -> dict[str, list[HistoryPoint]]:
        wanted = entity_id_list(entity_ids)
        t0, t1 = require_aware(start, "start").timestamp(), require_aware(end, "end").timestamp()
        result: dict[str, list[HistoryPoint]] = {}
        with self._lock:
            if t0 > self._clock().timestamp():
                return result  # HA: a window starting in the future has no history
            for entity_id in wanted:
                points = self._history_of(entity_id, t0, t1, minimal_response, no_attributes)
                if points:
                    result[entity_id] = points
        return result

    def registries(self) -> Registries:
        with self._lock:
            return sample_registries.registries(self._entities)

    def statistics(
        self, statistic_ids: Sequence[str], start: datetime, end: datetime, *, period: StatisticsPeriod = "hour"
    ) -> dict[str, list[StatisticPoint]]:
        require_aware(start, "start"), require_aware(end, "end")
        return sample_statistics.statistics(self, entity_id_list(statistic_ids), start, end, period)

    def logbook(self, start: datetime, end: datetime, *, entity_ids: Sequence[str] = ()) -> list[LogbookEntry]:
        t0, t1 = require_aware(start, "start").timestamp(), require_aware(end, "end").timestamp()
        only = set(entity_id_list(entity_ids)) if entity_ids else None
        entries: list[tuple[float, int, LogbookEntry]] = []
        with self._lock:
            base = self._data.runs
            first = bisect.bisect_left([run.when for run in base], t0)
            for run in [*base[first:], *self._runs]:
                if t0 <= run.when < t1 and run.kind != "call_service" and (only is None or run.entity_id in only):
                    entries.append((run.when, 0, self._run_entry(run)))
            for entity_id, entity in self._entities.items():
                if not entity.in_logbook or (only is not None and entity_id not in only):
                    continue
                for row in self._rows_between(entity_id, t0, t1):
                    if row.changed:
                        entries.append((row.when, 1, self._state_entry(entity, row)))
        entries.sort(key=lambda item: (item[0], item[1]))
        return [entry for _, _, entry in entries]

    def error_log(self) -> str:
        with self._lock:
            lines = [line.text(self._data.zone) for line in (*self._data.log, *self._log)]
        return "".join(line + "\n" for line in lines)

    def render_template(self, template: str) -> str:
        with self._lock:
            home = templates.TemplateHome(
                states=dict(self._current),
                now=self._clock(),
                time_zone=self._data.zone,
                areas=self._data.areas,
                entity_areas={e: entity.area for e, entity in self._entities.items() if entity.area},
                entity_integrations={e: entity.integration for e, entity in self._entities.items()},
            )
            try:
                return templates.render(template, home)
            except templates.TemplateError as exc:
                raise HABadRequest(f"Error rendering template: {exc}", status=400) from None

    def check_config(self) -> ConfigCheck:
        if self._config_errors:
            return ConfigCheck(result="invalid", errors=self._config_errors)
        return ConfigCheck(result="valid")

    def validate_automation(self, config: Mapping[str, Any]) -> list[str]:
        try:
            return refusals(self.validate_config(automation_parts(config)))
        except HABadRequest as refused:
            return [str(refused)]

    def validate_config(self, parts: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """The websocket command `validate_config`, as the HA version this home plays answers it."""
        try:
            return validated_parts(parts, self.config().version)
        except ValueError as exc:
            raise HABadRequest(str(exc), status=400) from None

    def automation_config(self, automation_id: str) -> dict[str, Any]:
        with self._lock:
            config = self._automations.get(automation_id)
            if config is None:
                raise HAUnknownEntity(
                    f"Home Assistant has no automation with id '{automation_id}'", entity_id=automation_id
                )
            return copy.deepcopy(config)

    def save_automation_config(self, automation_id: str, config: Mapping[str, Any]) -> None:
        new = validated_automation(config, self.version)
        with self._lock:
            # HA stores the body as sent (nothing of the old config is kept), its id first, then
            # alias, description, triggers, conditions, actions in that order, then the rest
            stored: dict[str, Any] = {"id": automation_id}
            for key in ("alias", "description", "triggers", "trigger", "conditions", "condition", "actions", "action"):
                if key in new:
                    stored[key] = new[key]
            stored.update(new)
            stored["id"] = automation_id
            self._automations[automation_id] = stored
            self._sync_automation(automation_id, self._stamp())

    def delete_automation_config(self, automation_id: str) -> None:
        with self._lock:
            if automation_id not in self._automations:
                raise HAUnknownEntity(
                    f"Home Assistant has no automation with id '{automation_id}'", entity_id=automation_id
                )
            del self._automations[automation_id]
            entity_id = self._automation_entities.pop(automation_id, None)
            if entity_id is not None:
                self._current.pop(entity_id, None)
                self._entities.pop(entity_id, None)

    def script_config(self, script_id: str) -> dict[str, Any]:
        script = self._scripts.get(script_id)
        if script is None:
            raise HAUnknownEntity(
                f"Home Assistant has no script with id '{script_id}'", entity_id=f"script.{script_id}"
            )
        return copy.deepcopy(dict(script))

    def call_service(self, domain: str, service: str, data: Mapping[str, Any] | None = None) -> list[State]:
        payload = dict(data or {})
        with self._lock:
            if not self._has_service(domain, service):
                raise HABadRequest(f"Service {domain}.{service} not found", status=400)
            if domain == "weather" and service == "get_forecasts":
                raise HABadRequest("Service call requires responses but caller did not ask for responses", status=400)
            when = self._stamp()
            context = self._run("call_service", when, user_id=API_USER_ID, domain=domain, service=service)
            changed = self._apply(domain, service, payload, context, when, 0)
            return [self._current[e].model_copy(deep=True) for e in dict.fromkeys(changed) if e in self._current]

    # ------------------------------------------------------------------ states

    def _initial_state(self, entity_id: str) -> State:
        rows = self._data.timelines[entity_id]
        row = rows[-1]
        changed_at = next((r.when for r in reversed(rows) if r.changed), rows[0].when)
        entity = self._data.entities[entity_id]
        attributes = dict(row.attributes if row.attributes is not None else entity.attributes)
        updated_at = row.when
        later = self._data.last_updated.get(entity_id)
        if later is not None and later[0] > row.when:
            updated_at, attributes = later[0], dict(later[1])
        if entity.domain in ("automation", "script"):
            attributes.setdefault("last_triggered", None)
        run = self._data.runs_by_id.get(row.context or "")
        context = StateContext(
            id=row.context or ulid(row.when, random.Random(f"{entity_id}:{row.when}")),
            user_id=run.user_id if run else None,
        )
        return State(
            entity_id=entity_id,
            state=row.state,
            attributes=attributes,
            last_changed=_dt(changed_at),
            last_updated=_dt(updated_at),
            last_reported=_dt(updated_at),
            context=context,
        )

    def _set(
        self, entity_id: str, state: str, attributes: Mapping[str, Any] | None, when: datetime, context: str
    ) -> bool:
        """Records a new state; False when nothing changed (HA records nothing either)."""
        old = self._current[entity_id]
        new_attributes = dict(old.attributes if attributes is None else attributes)
        if old.state == state and old.attributes == new_attributes:
            return False
        changed = old.state != state
        run = self._runs_by_id.get(context)
        self._current[entity_id] = State(
            entity_id=entity_id,
            state=state,
            attributes=new_attributes,
            last_changed=when if changed else old.last_changed,
            last_updated=when,
            last_reported=when,
            context=StateContext(id=context, user_id=run.user_id if run else None),
        )
        self._rows.setdefault(entity_id, []).append(
            Row(when.timestamp(), state, dict(new_attributes), context, changed=changed)
        )
        return True

    def _rows_between(self, entity_id: str, t0: float, t1: float) -> list[Row]:
        """Rows with t0 <= when < t1 (the base week's, then this home's own)."""
        base = self._data.timelines.get(entity_id, ())
        times = self._data.times.get(entity_id, ())
        rows = list(base[bisect.bisect_left(times, t0) : bisect.bisect_left(times, t1)])
        rows += [row for row in self._rows.get(entity_id, ()) if t0 <= row.when < t1]
        return rows

    def _history_of(
        self, entity_id: str, t0: float, t1: float, minimal: bool, no_attributes: bool
    ) -> list[HistoryPoint]:
        base = self._data.timelines.get(entity_id, ())
        times = self._data.times.get(entity_id, ())
        own = self._rows.get(entity_id, [])
        index = bisect.bisect_right(times, t0)
        before = [row for row in own if row.when <= t0]
        initial = before[-1] if before else (base[index - 1] if index else None)
        inside = list(base[index : bisect.bisect_left(times, t1)]) + [r for r in own if t0 < r.when < t1]
        if initial is None and not inside:
            return []
        entity = self._entities.get(entity_id) or self._data.entities.get(entity_id)
        domain = entity_id.split(".", 1)[0]
        static = entity.attributes if entity else {}
        full_always = domain in NEED_ATTRIBUTE_DOMAINS

        def attributes(row: Row, full: bool) -> dict[str, Any]:
            if no_attributes or not (full or full_always):
                return {}
            return copy.deepcopy(dict(row.attributes if row.attributes is not None else static))  # never the cache's

        points: list[HistoryPoint] = []
        start = _dt(t0)
        last_changed = start
        if initial is not None:
            points.append(
                HistoryPoint(
                    entity_id=entity_id,
                    state=initial.state,
                    last_changed=start,
                    last_updated=start,
                    attributes=attributes(initial, True),
                )
            )
        for row in inside:
            if not row.changed and domain not in SIGNIFICANT_DOMAINS:
                continue  # significant changes only: an attribute update is not one
            if minimal and not full_always and points and points[-1].state == row.state:
                continue
            when = _dt(row.when)
            if row.changed:
                last_changed = when
            points.append(
                HistoryPoint(
                    entity_id=entity_id,
                    state=row.state,
                    last_changed=last_changed if not row.changed else when,
                    last_updated=when,
                    attributes=attributes(row, not minimal),
                )
            )
        return points

    # ------------------------------------------------------------------ logbook

    def _run_entry(self, run: Run) -> LogbookEntry:
        if run.kind == "automation_triggered":
            return LogbookEntry(
                when=_dt(run.when),
                name=run.name,
                message=f"triggered by {run.source}",
                source=run.source,
                entity_id=run.entity_id,
                domain="automation",
                context_id=run.id,
                context_user_id=run.user_id,
            )
        return LogbookEntry(
            when=_dt(run.when),
            name=run.name,
            message="started",
            entity_id=run.entity_id,
            domain="script",
            context_id=run.id,
            context_user_id=run.user_id,
        )

    def _state_entry(self, entity: Entity, row: Row) -> LogbookEntry:
        run = self._data.runs_by_id.get(row.context or "") or self._runs_by_id.get(row.context or "")
        fields: dict[str, Any] = {}
        if run is not None and run.kind == "automation_triggered":
            fields = {
                "context_event_type": "automation_triggered",
                "context_domain": "automation",
                "context_entity_id": run.entity_id,
                "context_entity_id_name": run.name,
                "context_name": run.name,
                "context_message": f"triggered by {run.source}",
                "context_source": run.source,
            }
        elif run is not None and run.kind == "script_started":
            fields = {
                "context_event_type": "script_started",
                "context_domain": "script",
                "context_entity_id": run.entity_id,
                "context_entity_id_name": run.name,
                "context_name": run.name,
                "context_message": "started",
                "context_user_id": run.user_id,
            }
        elif run is not None:
            fields = {
                "context_event_type": "call_service",
                "context_domain": run.domain,
                "context_service": run.service,
                "context_user_id": run.user_id,
            }
        name = (row.attributes or entity.attributes).get("friendly_name", entity.name)
        return LogbookEntry(when=_dt(row.when), name=name, state=row.state, entity_id=entity.entity_id, **fields)

    # ------------------------------------------------------------------ automations

    def _sync_automation(self, automation_id: str, when: datetime) -> None:
        """What HA's reload after a save does: the automation's entity exists, named by its alias."""
        config = self._automations[automation_id]
        alias = str(config.get("alias") or automation_id)
        entity_id = self._automation_entities.get(automation_id)
        attributes = {
            "id": automation_id,
            "last_triggered": None,
            "mode": config.get("mode", "single"),
            "current": 0,
            "friendly_name": alias,
        }
        if entity_id is not None:
            attributes["last_triggered"] = self._current[entity_id].attributes.get("last_triggered")
            self._entities[entity_id] = Entity(entity_id, alias, None, "automation", attributes)
            self._set(entity_id, self._current[entity_id].state, attributes, when, self._run("reload", when))
            return
        entity_id = "automation." + slugify(alias)
        suffix = 2
        while entity_id in self._entities:
            entity_id = f"automation.{slugify(alias)}_{suffix}"
            suffix += 1
        self._automation_entities[automation_id] = entity_id
        self._entities[entity_id] = Entity(entity_id, alias, None, "automation", attributes)
        context = self._run("reload", when)
        state = "off" if config.get("initial_state") is False else "on"
        self._current[entity_id] = State(
            entity_id=entity_id,
            state=state,
            attributes=attributes,
            last_changed=when,
            last_updated=when,
            last_reported=when,
            context=StateContext(id=context),
        )
        self._rows.setdefault(entity_id, []).append(Row(when.timestamp(), state, dict(attributes), context))

    # ------------------------------------------------------------------ clock and runs

    def _clock(self) -> datetime:
        return self._data.now + timedelta(milliseconds=self._ticks)

    def _stamp(self) -> datetime:
        """The time of a change: `now`, a millisecond later for each one, so they stay in order."""
        self._ticks += 1
        return self._clock()

    def _run(self, kind: str, when: datetime, **cause: str | None) -> str:
        run = Run.started(kind, when.timestamp(), self._rng, **cause)
        if kind != "reload":
            self._runs.append(run)
        self._runs_by_id[run.id] = run
        return run.id


def _dt(moment: float) -> datetime:
    return datetime.fromtimestamp(moment, UTC)
