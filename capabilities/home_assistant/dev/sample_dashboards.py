"""The sample home's Lovelace dashboards, answering HA's websocket commands as HA 2024.x does (read in
homeassistant/components/lovelace: websocket.py, dashboard.py, const.py, and helpers/collection.py).

HA's ways kept: a storage dashboard's `id` is its url_path slugified with underscores (what delete takes),
a url_path needs a hyphen and must not be a panel already, a new dashboard holds no configuration until
one is saved (`config_not_found`, "No config found."), an unknown url_path is "Unknown config specified",
and an unknown id on delete is `not_found`. `LovelaceCommands` answers the commands by type, as the fake
server serves them; `SampleLovelace` is the HomeAssistant port's part over it (mixed into SampleHome), so
the sample and the REST client over the fake fail alike (`websocket.refusal`).
"""

from __future__ import annotations

import copy
import re
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from capabilities.home_assistant.ha.port import Dashboard
from capabilities.home_assistant.ha.websocket import refusal

# panels every HA has, which a dashboard's url_path cannot take ("Panel url path needs to be unique")
BUILT_IN_PANELS = frozenset(
    {"lovelace", "energy", "map", "logbook", "history", "config", "developer-tools", "profile", "media-browser"}
)
CREATE_FIELDS = frozenset({"url_path", "title", "icon", "mode", "require_admin", "show_in_sidebar"})
DEFAULTS = {"show_in_sidebar": True, "require_admin": False, "mode": "storage"}  # (HA fills them in its own order)


class CommandRefused(Exception):
    """HA's error answer to a websocket command: its code and message, sent as HA sends them."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class LovelaceCommands:
    """The dashboards and their configurations, changed only through HA's websocket commands."""

    def __init__(self) -> None:
        self._items: dict[str, dict[str, Any]] = {}  # url_path -> the dashboard, as HA stores it
        self._configs: dict[str, Any] = {}  # url_path -> its saved configuration

    def handlers(self) -> dict[str, Callable[[dict[str, Any]], Any]]:
        """Each command's type and what answers it (the fields of the message besides id and type)."""
        return {
            "lovelace/dashboards/list": lambda fields: [dict(item) for item in self._items.values()],
            "lovelace/dashboards/create": self.create,
            "lovelace/dashboards/delete": self.delete,
            "lovelace/config": self.config,
            "lovelace/config/save": self.save,
        }

    def create(self, fields: dict[str, Any]) -> dict[str, Any]:
        # first the command's schema (HA says what is wrong and the value it got there)...
        missing = [k for k in ("url_path", "title") if k not in fields]
        extra = sorted(set(fields) - CREATE_FIELDS)
        if missing:
            raise CommandRefused("invalid_format", f"required key not provided @ data['{missing[0]}']. Got None")
        if extra:
            raise CommandRefused(
                "invalid_format", f"extra keys not allowed @ data['{extra[0]}']. Got {fields[extra[0]]!r}"
            )
        if fields.get("mode", "storage") != "storage":
            message = "not a valid value for dictionary value @ data['mode']"
            raise CommandRefused("invalid_format", f"{message}. Got {fields['mode']!r}")
        icon = fields.get("icon")
        if icon is not None and ":" not in str(icon):
            message = "Icons should be specified in the form \"prefix:name\" for dictionary value @ data['icon']"
            raise CommandRefused("invalid_format", f"{message}. Got {icon!r}")
        # ...then the collection's own rules, quoting the fields with the schema's defaults filled in
        data = {**fields, **{k: v for k, v in DEFAULTS.items() if k not in fields}}
        url_path = str(fields["url_path"])
        if "-" not in url_path:
            raise CommandRefused("invalid_format", f"Url path needs to contain a hyphen (-). Got {data}")
        if url_path in BUILT_IN_PANELS or url_path in self._items:
            raise CommandRefused("invalid_format", f"Panel url path needs to be unique. Got {data}")
        base = re.sub(r"[^a-z0-9]+", "_", url_path.lower()).strip("_") or "unknown"
        taken = {item["id"] for item in self._items.values()}
        ident, n = base, 2
        while ident in taken:
            ident, n = f"{base}_{n}", n + 1
        item = {
            "id": ident,
            "require_admin": bool(fields.get("require_admin", False)),
            "title": str(fields["title"]),
            "show_in_sidebar": bool(fields.get("show_in_sidebar", True)),
            "url_path": url_path,
            "mode": "storage",
            **({"icon": icon} if icon is not None else {}),
        }
        self._items[url_path] = item
        return dict(item)

    def delete(self, fields: dict[str, Any]) -> None:
        ident = fields.get("dashboard_id")
        found = next((path for path, item in self._items.items() if item["id"] == ident), None)
        if found is None:
            raise CommandRefused("not_found", f"Unable to find dashboard_id {ident}")
        del self._items[found]
        self._configs.pop(found, None)  # HA removes the dashboard's stored configuration with it

    def config(self, fields: dict[str, Any]) -> Any:
        url_path = self._known(fields)
        if url_path not in self._configs:  # the default dashboard too: this home never saved one
            raise CommandRefused("config_not_found", "No config found.")
        return copy.deepcopy(self._configs[url_path])

    def save(self, fields: dict[str, Any]) -> None:
        if "config" not in fields:
            raise CommandRefused("invalid_format", "required key not provided @ data['config']. Got None")
        if not isinstance(fields["config"], dict | str):  # HA stores a string as it is
            message = "expected str for dictionary value @ data['config']"
            raise CommandRefused("invalid_format", f"{message}. Got {fields['config']!r}")
        self._configs[self._known(fields)] = copy.deepcopy(fields["config"])

    def _known(self, fields: dict[str, Any]) -> str:
        url_path = fields.get("url_path")
        if url_path is not None and url_path not in self._items:
            raise CommandRefused("config_not_found", f"Unknown config specified: {url_path}")
        return str(url_path)


class SampleLovelace:
    """The HomeAssistant port's dashboard operations over `LovelaceCommands` (a part of SampleHome)."""

    if TYPE_CHECKING:  # what SampleHome holds
        _lock: threading.RLock
        _lovelace: LovelaceCommands

    def lovelace_commands(self) -> dict[str, Callable[[dict[str, Any]], Any]]:
        """The websocket commands of the dashboards, as the fake server serves them."""
        return self._lovelace.handlers()

    def dashboards(self) -> list[Dashboard]:
        return [Dashboard.model_validate(item) for item in self._command("lovelace/dashboards/list")]

    def create_dashboard(
        self,
        url_path: str,
        title: str,
        *,
        icon: str | None = None,
        require_admin: bool = False,
        show_in_sidebar: bool = True,
    ) -> Dashboard:
        fields = {"url_path": url_path, "title": title, "mode": "storage", "require_admin": require_admin}
        fields |= {"show_in_sidebar": show_in_sidebar, **({"icon": icon} if icon else {})}
        return Dashboard.model_validate(self._command("lovelace/dashboards/create", **fields))

    def dashboard_config(self, url_path: str) -> dict[str, Any]:
        answer: dict[str, Any] = self._command("lovelace/config", url_path=url_path)
        return answer

    def save_dashboard_config(self, url_path: str, config: Mapping[str, Any]) -> None:
        self._command("lovelace/config/save", url_path=url_path, config=dict(config))

    def delete_dashboard(self, dashboard_id: str) -> None:
        self._command("lovelace/dashboards/delete", dashboard_id=dashboard_id)

    def _command(self, command: str, **fields: Any) -> Any:
        with self._lock:
            try:
                return self._lovelace.handlers()[command](copy.deepcopy(fields))
            except CommandRefused as exc:
                raise refusal(command, fields, exc.code, exc.message, None) from None
