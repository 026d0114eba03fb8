"""RestHomeAssistant: the HomeAssistant port over HA's REST API, with a long-lived access token.

A mission must never hang on a house that does not answer, and must never show or log the token.
So every operation has an overall deadline (`deadline`, 30 s by default) that bounds its attempts
(`attempts`, each cut at `timeout`) and the waits between them; failures worth another try are
retried with tenacity: refused connections, timeouts, HTTP 429 (waiting what Retry-After asks,
unless that is past the deadline) and 5xx. A call that changes the house (a service call, a
delete) is retried only when HA cannot have run it (no connection, 429, 502-504), so a light is
never toggled twice. Websocket commands (registries, statistics, dashboards) follow the same policy:
tried again when their connection did not open, and when their answer did not come only if running
them twice is harmless. What is left becomes one of the port's errors, whose message names the host.

The token is a string or a `token_provider` (called once per operation: in AWS the token lives in
Secrets Manager behind the runtime's SecretReader, which caches and follows rotation). It only ever
goes into the Authorization header; messages are scrubbed of it all the same.

Built on httpx2, the maintained continuation of httpx that the Lambda layer already ships
(openai's HTTP client); `transport` takes an httpx2 transport for tests.
"""

from __future__ import annotations

import email.utils
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NoReturn, TypeVar
from urllib.parse import quote

import httpx2
import tenacity
from pydantic import BaseModel, ValidationError

from capabilities.home_assistant.ha.port import (
    ConfigCheck,
    Dashboard,
    HABadRequest,
    HAConfig,
    HAError,
    HATokenRejected,
    HAUnknownEntity,
    HAUnreachable,
    HistoryPoint,
    LogbookEntry,
    Registries,
    ServiceDomain,
    State,
    StatisticPoint,
    StatisticsPeriod,
    automation_parts,
    entity_id_list,
    refusals,
    require_aware,
)
from capabilities.home_assistant.ha.websocket import HAWebSocket, WebSocketNoAnswer, WebSocketNotOpened

logger = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

RETRY_STATUSES_ALWAYS = frozenset({429, 502, 503, 504})  # HA did not run the request
MAX_BACKOFF = 8.0


class _Transient(Exception):
    """An attempt failed in a way another attempt may not (internal: never leaves this module)."""

    def __init__(self, reason: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.retry_after = retry_after


class RestHomeAssistant:
    """A Home Assistant reached over HTTP(S); see the module docstring for retries and deadlines."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        token_provider: Callable[[], str] | None = None,
        timeout: float = 10.0,
        attempts: int = 3,
        deadline: float = 30.0,
        backoff: float = 0.5,
        transport: httpx2.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if (token is None) == (token_provider is None):
            raise ValueError("give the access token or a token_provider (exactly one)")
        url = httpx2.URL(base_url.strip())
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"not an http(s) URL of a Home Assistant: {url.scheme}://{url.host}")
        if timeout <= 0 or deadline <= 0 or attempts < 1:
            raise ValueError("timeout and deadline must be positive, attempts at least 1")
        path = url.path.rstrip("/")
        path = path[: -len("/api")] if path.endswith("/api") else path  # "http://ha:8123/api" is common
        self.base_url = str(url.copy_with(path=path + "/", query=None, fragment=None, username=None, password=None))
        self.host = f"{url.host}:{url.port}" if url.port else url.host
        self._token_value = token
        self._token_provider = token_provider
        self._timeout = timeout
        self._attempts = attempts
        self._deadline = deadline
        self._backoff = backoff
        self._sleep = sleep
        self._clock = clock
        self._client = httpx2.Client(
            base_url=self.base_url, transport=transport, timeout=timeout, follow_redirects=False
        )
        self._token_seen = ""  # the token of the operation under way, to scrub from messages
        self._websocket = HAWebSocket(self.base_url, self._token, host=self.host, timeout=timeout)

    def __repr__(self) -> str:
        return f"RestHomeAssistant({self.base_url!r})"

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> RestHomeAssistant:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the port

    def config(self) -> HAConfig:
        return _parse(HAConfig, self._json("GET", "api/config"), "GET /api/config", self)

    def services(self) -> list[ServiceDomain]:
        answer = self._json("GET", "api/services")
        return [
            _parse(ServiceDomain, item, "GET /api/services", self) for item in _list(answer, "GET /api/services", self)
        ]

    def states(self) -> list[State]:
        answer = self._json("GET", "api/states")
        return [_parse(State, item, "GET /api/states", self) for item in _list(answer, "GET /api/states", self)]

    def state(self, entity_id: str) -> State:
        answer = self._json(
            "GET",
            f"api/states/{quote(entity_id, safe='')}",
            not_found=lambda: HAUnknownEntity(
                f"Home Assistant at {self.host} has no entity '{entity_id}'", entity_id=entity_id, host=self.host
            ),
        )
        return _parse(State, answer, "GET /api/states/<entity_id>", self)

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
        params: dict[str, str] = {
            "filter_entity_id": ",".join(wanted),
            "end_time": _iso(require_aware(end, "end")),
        }
        if minimal_response:
            params["minimal_response"] = ""
        if no_attributes:
            params["no_attributes"] = ""
        what = "GET /api/history/period"
        answer = self._json(
            "GET", f"api/history/period/{quote(_iso(require_aware(start, 'start')), safe='')}", params=params
        )
        found: dict[str, list[HistoryPoint]] = {}
        for series in _list(answer, what, self):
            items = _list(series, what, self)
            if not items:
                continue
            first = items[0] if isinstance(items[0], Mapping) else {}
            entity_id = str(first.get("entity_id", ""))
            points = []
            for item in items:
                if not isinstance(item, Mapping):
                    raise HAError(f"unexpected answer from Home Assistant at {self.host} to {what}", host=self.host)
                points.append(
                    _parse(
                        HistoryPoint,
                        {
                            "entity_id": item.get("entity_id", entity_id),
                            "state": item.get("state"),
                            "last_changed": item.get("last_changed"),
                            "last_updated": item.get("last_updated", item.get("last_changed")),
                            "attributes": item.get("attributes") or {},
                        },
                        what,
                        self,
                    )
                )
            found[entity_id] = points
        return {entity_id: found[entity_id] for entity_id in wanted if entity_id in found}  # in the order asked

    def logbook(self, start: datetime, end: datetime, *, entity_ids: Sequence[str] = ()) -> list[LogbookEntry]:
        params = {"end_time": _iso(require_aware(end, "end"))}
        if entity_ids:
            params["entity"] = ",".join(entity_id_list(entity_ids))
        answer = self._json("GET", f"api/logbook/{quote(_iso(require_aware(start, 'start')), safe='')}", params=params)
        what = "GET /api/logbook"
        return [_parse(LogbookEntry, item, what, self) for item in _list(answer, what, self)]

    def error_log(self) -> str:
        return self._request("GET", "api/error_log").text

    def render_template(self, template: str) -> str:
        return self._request("POST", "api/template", json={"template": template}).text

    def check_config(self) -> ConfigCheck:
        return _parse(ConfigCheck, self._json("POST", "api/config/core/check_config"), "check_config", self)

    def registries(self) -> Registries:
        found = {kind: self._command(f"config/{kind}_registry/list") for kind in ("area", "device", "entity")}
        return _parse(
            Registries,
            {"areas": found["area"], "devices": found["device"], "entities": found["entity"]},
            "the registries",
            self,
        )

    def statistics(
        self, statistic_ids: Sequence[str], start: datetime, end: datetime, *, period: StatisticsPeriod = "hour"
    ) -> dict[str, list[StatisticPoint]]:
        answer = self._command(
            "recorder/statistics_during_period",
            start_time=_iso(require_aware(start, "start")),
            end_time=_iso(require_aware(end, "end")),
            statistic_ids=entity_id_list(statistic_ids),
            period=period,
            types=["mean", "min", "max", "state", "sum", "change"],
        )
        if not isinstance(answer, Mapping):
            raise HAError(f"unexpected answer from Home Assistant at {self.host} to statistics: not an object")
        return {
            statistic_id: [_parse(StatisticPoint, _from_milliseconds(row), "statistics", self) for row in rows]
            for statistic_id, rows in answer.items()
            if isinstance(rows, list)
        }

    def validate_automation(self, config: Mapping[str, Any]) -> list[str]:
        try:
            return refusals(self._command("validate_config", **automation_parts(config)))
        except HABadRequest as refused:  # the command's own schema refused it: a spelling this release lacks
            return [str(refused)]

    def automation_config(self, automation_id: str) -> dict[str, Any]:
        answer = self._json(
            "GET",
            f"api/config/automation/config/{quote(automation_id, safe='')}",
            not_found=lambda: self._no_automation(automation_id),
        )
        if not isinstance(answer, dict):
            raise HAError(
                f"unexpected answer from Home Assistant at {self.host} to an automation's config", host=self.host
            )
        return answer

    def save_automation_config(self, automation_id: str, config: Mapping[str, Any]) -> None:
        self._json("POST", f"api/config/automation/config/{quote(automation_id, safe='')}", json=dict(config))

    def delete_automation_config(self, automation_id: str) -> None:
        self._json(
            "DELETE",
            f"api/config/automation/config/{quote(automation_id, safe='')}",
            idempotent=False,  # retried after it went through, it would report a missing automation
            not_found=lambda: self._no_automation(automation_id),
        )

    def script_config(self, script_id: str) -> dict[str, Any]:
        answer = self._json(
            "GET",
            f"api/config/script/config/{quote(script_id, safe='')}",
            not_found=lambda: HAUnknownEntity(
                f"Home Assistant at {self.host} has no script with id '{script_id}'",
                entity_id=f"script.{script_id}",
                host=self.host,
            ),
        )
        if not isinstance(answer, dict):
            raise HAError(f"unexpected answer from Home Assistant at {self.host} to a script's config", host=self.host)
        return answer

    def call_service(self, domain: str, service: str, data: Mapping[str, Any] | None = None) -> list[State]:
        path = f"api/services/{quote(domain, safe='')}/{quote(service, safe='')}"
        answer = self._json("POST", path, json=dict(data or {}), idempotent=False)
        if isinstance(answer, dict) and "changed_states" in answer:
            answer = answer["changed_states"]
        what = f"POST /api/services/{domain}/{service}"
        return [_parse(State, item, what, self) for item in _list(answer, what, self)]

    def dashboards(self) -> list[Dashboard]:
        what = "lovelace/dashboards/list"
        return [_parse(Dashboard, item, what, self) for item in _list(self._command(what), what, self)]

    def create_dashboard(
        self,
        url_path: str,
        title: str,
        *,
        icon: str | None = None,
        require_admin: bool = False,
        show_in_sidebar: bool = True,
    ) -> Dashboard:
        fields: dict[str, Any] = {
            "url_path": url_path,
            "title": title,
            "mode": "storage",
            "require_admin": require_admin,
            "show_in_sidebar": show_in_sidebar,
            **({"icon": icon} if icon else {}),
        }
        what = "lovelace/dashboards/create"  # run twice, the second would find its url_path taken
        return _parse(Dashboard, self._command(what, idempotent=False, **fields), what, self)

    def dashboard_config(self, url_path: str) -> dict[str, Any]:
        answer = self._command("lovelace/config", url_path=url_path)
        if not isinstance(answer, dict):  # a YAML dashboard's file may hold anything
            raise HAError(f"unexpected answer from Home Assistant at {self.host} to lovelace/config", host=self.host)
        return answer

    def save_dashboard_config(self, url_path: str, config: Mapping[str, Any]) -> None:
        self._command("lovelace/config/save", url_path=url_path, config=dict(config))  # the same config twice: harmless

    def delete_dashboard(self, dashboard_id: str) -> None:
        self._command("lovelace/dashboards/delete", idempotent=False, dashboard_id=dashboard_id)

    # ------------------------------------------------------------------ HTTP

    def _no_automation(self, automation_id: str) -> HAUnknownEntity:
        return HAUnknownEntity(
            f"Home Assistant at {self.host} has no automation with id '{automation_id}'",
            entity_id=automation_id,
            host=self.host,
        )

    def _json(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json: Any = None,
        idempotent: bool = True,
        not_found: Callable[[], HAError] | None = None,
    ) -> Any:
        response = self._request(method, path, params=params, json=json, idempotent=idempotent, not_found=not_found)
        try:
            return response.json()
        except ValueError:
            raise HAError(
                f"Home Assistant at {self.host} answered {method} /{path} with something that is not JSON",
                host=self.host,
                status=response.status_code,
            ) from None

    def _token(self) -> str:
        if self._token_provider is not None:
            try:
                token = self._token_provider()
            except Exception as exc:
                raise HAError(
                    f"could not read the access token for Home Assistant at {self.host} ({type(exc).__name__})",
                    host=self.host,
                ) from None
        else:
            token = self._token_value or ""
        token = (token or "").strip()
        if not token:
            raise HATokenRejected(
                f"no access token for Home Assistant at {self.host}: set HA_TOKEN to a long-lived access token",
                host=self.host,
            )
        return token

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json: Any = None,
        idempotent: bool = True,
        not_found: Callable[[], HAError] | None = None,
    ) -> httpx2.Response:
        """One operation: its attempts within the deadline, then the answer or the port's error."""
        token = self._token()
        self._token_seen = token
        headers = {"Authorization": f"Bearer {token}"}
        shown = f"{method} /{path}"

        def attempt(remaining: float) -> httpx2.Response:
            limit = min(self._timeout, remaining)
            try:
                response = self._client.request(method, path, params=params, json=json, headers=headers, timeout=limit)
            except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
                raise _Transient(f"cannot connect ({_describe(exc)})") from None
            except (httpx2.TimeoutException, httpx2.TransportError) as exc:
                reason = (
                    f"no answer within {limit:.1f} s" if isinstance(exc, httpx2.TimeoutException) else _describe(exc)
                )
                if idempotent:
                    raise _Transient(reason) from None
                raise HAUnreachable(
                    self._scrub(f"Home Assistant at {self.host} did not answer {shown} ({reason}); it may have run it"),
                    host=self.host,
                ) from None
            status = response.status_code
            if status in RETRY_STATUSES_ALWAYS or (status >= 500 and idempotent):
                raise _Transient(f"HTTP {status}", status=status, retry_after=_retry_after(response))
            return response

        return self._checked(self._retried(shown, attempt), shown, not_found)

    def _command(self, command: str, *, idempotent: bool = True, **fields: Any) -> Any:
        """One websocket command, tried again as an HTTP request is: always when its connection did not
        open (nothing was sent), and when its answer did not come only if running it twice is harmless."""

        def attempt(remaining: float) -> Any:
            try:
                return self._websocket.call(command, **fields)
            except WebSocketNotOpened as failure:
                raise _Transient(f"its websocket API did not open ({failure})") from None
            except WebSocketNoAnswer as failure:
                if idempotent:
                    raise _Transient(f"no answer to {command}") from None
                raise HAUnreachable(f"{failure}; it may have run it", host=self.host) from None

        return self._retried(f"websocket {command}", attempt)

    def _retried(self, shown: str, attempt: Callable[[float], T]) -> T:
        """`attempt(seconds left)` until it succeeds, raises the port's error, or its failures worth another
        try (_Transient) run out of attempts or of time before the deadline."""
        started = self._clock()
        deadline = started + self._deadline
        attempts = 0

        def once() -> T:
            nonlocal attempts
            attempts += 1
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise _Transient("no time left before the deadline")
            return attempt(remaining)

        def wait(state: tenacity.RetryCallState) -> float:
            failure = _failure(state)
            if failure.retry_after is not None:
                return failure.retry_after
            return float(min(self._backoff * 2 ** (state.attempt_number - 1), MAX_BACKOFF))

        def stop(state: tenacity.RetryCallState) -> bool:
            return state.attempt_number >= self._attempts or self._clock() + wait(state) >= deadline

        def before_sleep(state: tenacity.RetryCallState) -> None:
            logger.warning(
                "Home Assistant at %s: %s on %s, attempt %d of %d; retrying in %.2f s",
                self.host,
                _failure(state).reason,
                shown,
                state.attempt_number,
                self._attempts,
                wait(state),
            )

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(_Transient),
            stop=stop,
            wait=wait,
            sleep=self._sleep,
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            return retrying(once)
        except _Transient as failure:
            self._give_up(failure, shown, attempts, self._clock() - started)

    def _give_up(self, failure: _Transient, shown: str, attempts: int, elapsed: float) -> NoReturn:
        tried = f"{attempts} attempt{'s' if attempts != 1 else ''} in {elapsed:.1f} s"
        if failure.status is None:
            raise HAUnreachable(
                self._scrub(f"Home Assistant at {self.host} is unreachable: {failure.reason} ({tried})"), host=self.host
            )
        if failure.status == 429:
            asked = f"; it asks to wait {failure.retry_after:.0f} s" if failure.retry_after is not None else ""
            raise HAError(
                self._scrub(f"Home Assistant at {self.host} is refusing requests for now (HTTP 429, {tried}){asked}"),
                host=self.host,
                status=429,
            )
        raise HAError(
            self._scrub(f"Home Assistant at {self.host} failed {shown} with HTTP {failure.status} ({tried})"),
            host=self.host,
            status=failure.status,
        )

    def _checked(
        self, response: httpx2.Response, shown: str, not_found: Callable[[], HAError] | None
    ) -> httpx2.Response:
        status = response.status_code
        if status < 300:
            return response
        message = self._scrub(_message(response))
        if status == 401:
            raise HATokenRejected(
                f"Home Assistant at {self.host} rejected the access token (HTTP 401): "
                "check HA_TOKEN, or create a new long-lived access token in your HA profile",
                host=self.host,
                status=401,
            )
        if status == 403:
            raise HAError(
                f"Home Assistant at {self.host} refused {shown} (HTTP 403): the token's user must be an administrator",
                host=self.host,
                status=403,
            )
        if not_found is not None and (status == 404 or (status == 400 and "not found" in message.lower())):
            raise not_found()
        if status == 404:
            raise HAError(
                f"Home Assistant at {self.host} has no {shown} (HTTP 404): is the integration serving it loaded?",
                host=self.host,
                status=404,
            )
        if status == 400:
            raise HABadRequest(f"Home Assistant at {self.host} refused {shown}: {message}", host=self.host, status=400)
        raise HAError(
            f"Home Assistant at {self.host} failed {shown} with HTTP {status}: {message}", host=self.host, status=status
        )

    def _scrub(self, text: str) -> str:
        token = self._token_seen
        return text.replace(token, "***") if len(token) >= 4 else text


# ---------------------------------------------------------------------- helpers


def _failure(state: tenacity.RetryCallState) -> _Transient:
    outcome = state.outcome
    failure = outcome.exception() if outcome is not None else None
    assert isinstance(failure, _Transient)
    return failure


def _retry_after(response: httpx2.Response) -> float | None:
    """Retry-After in seconds (a number of seconds or an HTTP date), when the server sent one."""
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _message(response: httpx2.Response) -> str:
    """HA's explanation: {"message": ...} or its plain text, on one line and not too long."""
    try:
        body = response.json()
    except ValueError:
        body = None
    text = str(body.get("message")) if isinstance(body, dict) and body.get("message") else response.text
    text = " ".join(text.split())
    return text[:300] + ("…" if len(text) > 300 else "") if text else f"HTTP {response.status_code}"


def _describe(exc: Exception) -> str:
    detail = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {detail}"[:200] if detail else type(exc).__name__


def _from_milliseconds(row: Any) -> Any:
    """HA sends a statistic's `start` and `end` as milliseconds since the epoch."""
    if not isinstance(row, Mapping):
        return row
    times = {k: row[k] for k in ("start", "end") if isinstance(row.get(k), int | float)}
    return {**row, **{k: datetime.fromtimestamp(v / 1000, UTC) for k, v in times.items()}}


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


def _list(answer: Any, what: str, ha: RestHomeAssistant) -> list[Any]:
    if not isinstance(answer, list):
        raise HAError(f"unexpected answer from Home Assistant at {ha.host} to {what}: not a list", host=ha.host)
    return answer


def _parse(model: type[M], data: Any, what: str, ha: RestHomeAssistant) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "answer"
        raise HAError(
            f"unexpected answer from Home Assistant at {ha.host} to {what}: {where}: {first['msg']}", host=ha.host
        ) from None
