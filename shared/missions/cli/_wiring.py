"""What the commands that talk to an API go through: the one seam a test replaces."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from missions.client import TokenCache, Transport, config_dir, urllib_transport


def _cloudformation(region: str | None) -> Any:
    import boto3

    return boto3.client("cloudformation", region_name=region)


def _open_browser(url: str) -> None:
    import webbrowser

    webbrowser.open(url)


@dataclass
class Wiring:
    """What the commands that talk to an API go through. `missions` passes these; a test hands its
    own to typer as `obj` (a transport playing API Gateway, a CloudFormation client on moto)."""

    transport: Transport = urllib_transport
    cloudformation: Callable[[str | None], Any] = _cloudformation
    cache: Callable[[], TokenCache] = lambda: TokenCache(config_dir() / "tokens.json")
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    open_browser: Callable[[str], None] = _open_browser
