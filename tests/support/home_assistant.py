"""A real Home Assistant for the tests: the pinned release in `.ha/venv` (`make ha`), on loopback.

`running_home_assistant(tmp)` writes a configuration into `tmp` (the demo integration's lights and
sensors, the recorder in a SQLite file there, automations.yaml and scripts.yaml as HA keeps them),
starts `hass --skip-pip` on a free loopback port, waits until it answers, onboards it (an owner and a
long-lived access token, by `ha_onboard.py` in HA's own venv) and waits until HA is running, then
yields where it is and the token. Nothing is installed here: without `.ha/venv` the caller skips.
HA runs as a child process and is stopped (SIGTERM, then SIGKILL) when the block ends.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HA_VENV = REPO / ".ha" / "venv"
ONBOARD = Path(__file__).with_name("ha_onboard.py")
MISSING = f"the real Home Assistant is not installed ({HA_VENV} is missing): `make ha` prepares it"

START_TIMEOUT = 180.0  # a cold start on a busy 2-core machine (the frontend, the demo's 30 platforms)
STOP_TIMEOUT = 30.0

VERSION = "2024.3.3"  # the release requirements/ha.in pins (the newest that runs on Python 3.11)

# What every start needs from the demo integration (and what the conformance suite uses).
DEMO_LIGHT = "light.ceiling_lights"
DEMO_SENSOR = "sensor.outside_temperature"
DEMO_METER = "sensor.total_energy_kwh"  # a demo meter (state_class total_increasing)
SAMPLE_SCRIPT = "evening_lights"

CONFIGURATION = """\
homeassistant:
  name: Test Home
  latitude: 52.3731
  longitude: 4.8922
  elevation: 2
  unit_system: metric
  time_zone: Europe/Amsterdam
  currency: EUR
  country: NL

http:
  server_host: 127.0.0.1
  server_port: {port}

api:
config:
onboarding:
history:
logbook:
system_log:
logger:
  default: warning

recorder:
  db_url: sqlite:///{db}
  commit_interval: 0

automation: !include automations.yaml
script: !include scripts.yaml

demo:
"""

SCRIPTS = f"""\
{SAMPLE_SCRIPT}:
  alias: Evening lights
  sequence:
    - service: light.turn_on
      target:
        entity_id: {DEMO_LIGHT}
  mode: single
"""


@dataclass(frozen=True)
class RunningHomeAssistant:
    url: str
    token: str
    version: str
    config_dir: Path
    started_in: float  # seconds from `hass` starting to a usable token and a running core


def installed() -> bool:
    return (HA_VENV / "bin" / "hass").is_file()


def write_config(config_dir: Path, port: int) -> None:
    """The configuration HA starts with: the demo home, the integrations the REST API needs."""
    config_dir.mkdir(parents=True, exist_ok=True)
    db = config_dir / "home-assistant_v2.db"
    (config_dir / "configuration.yaml").write_text(CONFIGURATION.format(port=port, db=db))
    (config_dir / "automations.yaml").write_text("[]\n")
    (config_dir / "scripts.yaml").write_text(SCRIPTS)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running_home_assistant(config_dir: Path) -> Iterator[RunningHomeAssistant]:
    """HA started in `config_dir`, onboarded, running; stopped when the block ends."""
    if not installed():
        raise RuntimeError(MISSING)
    port = free_port()
    write_config(config_dir, port)
    url = f"http://127.0.0.1:{port}"
    log = config_dir / "hass.out"
    started = time.monotonic()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(HA_VENV / "bin" / "hass"), "-c", str(config_dir), "--skip-pip"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        deadline = started + START_TIMEOUT
        _wait(lambda: _get(f"{url}/api/onboarding") is not None, process, deadline, log, "to answer HTTP")
        try:
            onboarded = subprocess.run(
                [str(HA_VENV / "bin" / "python"), str(ONBOARD), url],
                capture_output=True,
                text=True,
                timeout=max(1.0, deadline - time.monotonic()),
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"onboarding Home Assistant did not finish in time\n{_tail(log)}") from None
        if onboarded.returncode != 0:
            raise RuntimeError(f"onboarding Home Assistant failed: {onboarded.stderr.strip()[-2000:]}\n{_tail(log)}")
        answer = json.loads(onboarded.stdout)
        token = answer["token"]

        def running() -> bool:
            config = _get(f"{url}/api/config", token)
            return bool(config and config.get("state") == "RUNNING" and _get(f"{url}/api/states/{DEMO_LIGHT}", token))

        _wait(running, process, deadline, log, "to be running with the demo's entities")
        yield RunningHomeAssistant(url, token, answer["version"], config_dir, time.monotonic() - started)
    finally:
        _stop(process)


def _get(url: str, token: str | None = None) -> dict[str, object] | None:
    """The JSON object at `url`, or None while HA does not answer it (yet)."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            body = json.loads(response.read())
    except (OSError, ValueError):  # refused, reset, 404 while loading, a half-written answer
        return None
    return body if isinstance(body, dict) else {"items": body}


def _wait(ready: Callable[[], bool], process: subprocess.Popen[bytes], deadline: float, log: Path, what: str) -> None:
    while not ready():
        if process.poll() is not None:
            raise RuntimeError(f"Home Assistant exited with {process.returncode} before {what}\n{_tail(log)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"Home Assistant did not get {what} within {START_TIMEOUT:.0f} s\n{_tail(log)}")
        time.sleep(0.25)


def _tail(log: Path, lines: int = 40) -> str:
    text = log.read_text(errors="replace") if log.exists() else ""
    ha_log = log.with_name("home-assistant.log")
    if ha_log.exists():
        text += ha_log.read_text(errors="replace")
    return "last lines of Home Assistant's log:\n" + "\n".join(text.splitlines()[-lines:])


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)  # HA stops cleanly on SIGTERM (the recorder closes its database)
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=STOP_TIMEOUT)


def import_statistics(ha: RunningHomeAssistant, statistic_id: str, *, days: int) -> None:
    """Give a meter `days` of hourly long-term statistics, as HA's recorder would have compiled them
    (websocket `recorder/import_statistics`): a fresh HA compiles its first hour only after an hour."""
    from capabilities.home_assistant.ha.websocket import HAWebSocket

    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    hours = [end - timedelta(hours=days * 24 - i) for i in range(days * 24)]
    used = [0.2 + 0.8 * ((h.hour - 6) % 24 < 16) for h in hours]  # kWh an hour: more by day than by night
    stats = [
        {"start": h.isoformat(), "state": round(1000 + sum(used[: i + 1]), 3), "sum": round(sum(used[: i + 1]), 3)}
        for i, h in enumerate(hours)
    ]
    metadata = {
        "has_mean": False,
        "has_sum": True,
        "name": None,
        "source": "recorder",
        "statistic_id": statistic_id,
        "unit_of_measurement": "kWh",
    }
    socket = HAWebSocket(ha.url.rstrip("/") + "/", lambda: ha.token, host="127.0.0.1", timeout=30)
    socket.call("recorder/import_statistics", metadata=metadata, stats=stats)
    # the recorder imports them in its own thread: wait (bounded) until they read back
    asked = {"start_time": hours[0].isoformat(), "statistic_ids": [statistic_id], "period": "hour", "types": ["sum"]}
    deadline = time.monotonic() + 30
    while len(socket.call("recorder/statistics_during_period", **asked).get(statistic_id, [])) < len(hours):
        if time.monotonic() > deadline:
            raise RuntimeError(f"Home Assistant did not import the statistics of {statistic_id} within 30 s")
        time.sleep(0.1)
