"""`missions dev`: the HTTP API on 127.0.0.1 over the embedded emulation."""

from __future__ import annotations

import os
import time

import typer

from missions.core.capability import registry as registry

from .._console import fail, out
from .._inputs import llm_settings, model_label, operators_from_env, repo_roots

app = typer.Typer()


@app.command("dev")
def dev(
    port: int = typer.Option(8787, min=1, max=65535, help="Port on 127.0.0.1."),
    webhook_secret: str = typer.Option(
        "whsec_ZGV2LXNlY3JldA==", help="Secret (Standard Webhooks: whsec_<base64>) of every local webhook source."
    ),
    roots_given: list[str] = typer.Option(
        [],
        "--repo-root",
        help="A directory whose repositories missions may read by path (repeatable; default: the current directory).",
    ),
    operators: list[str] = typer.Option(
        [],
        "--operator",
        help="A user who may change agent configurations and share repositories (repeatable; "
        "default: MISSIONS_OPERATORS, a JSON list).",
    ),
    retain_minutes: float | None = typer.Option(
        None,
        "--retain-minutes",
        min=0.1,
        help="Archive each ended mission this many minutes after it ended and prune its bulky items (events, "
        "questions, tool journal, artifacts, model calls; the record stays); retention runs every minute, or "
        "every half of this age if shorter. Default: no retention (the emulation keeps everything).",
    ),
) -> None:
    """Serve the HTTP API on 127.0.0.1 over the embedded emulation (dev tokens: 'Bearer dev:<user>')."""
    from missions.local.devserver import DEV_TOKEN_PREFIX, DevServer
    from missions.local.emulation import LocalCloud
    from missions.ports.webhooks import secret_key

    try:
        secret_key(webhook_secret)
    except ValueError as exc:
        fail(f"--webhook-secret: {exc}")
    capabilities = registry.load_all()
    sources = {t.source: {"secret": webhook_secret} for c in capabilities for t in c.triggers.webhooks}
    llm = llm_settings()
    roots = repo_roots(roots_given or [os.getcwd()])
    named = operators or operators_from_env()
    settings = {**llm, "webhook_sources": sources, "repo_roots": roots, "operators": named}
    every = None
    if retain_minutes is not None:
        settings["retention_minutes"] = retain_minutes
        every = min(60.0, retain_minutes * 30)
    with LocalCloud(settings=settings) as cloud:
        try:
            server = DevServer(cloud, port=port, retention_every=every).start()
        except OSError as exc:
            fail(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}")
        out.print(
            f"[bold]missions dev[/] on {server.url} · {len(capabilities)} capabilities · {model_label(llm)}",
            highlight=False,
        )
        out.print(f"  auth (dev mode only): Authorization: Bearer {DEV_TOKEN_PREFIX}<user>", highlight=False)
        out.print(
            f"  try: curl -H 'Authorization: Bearer {DEV_TOKEN_PREFIX}alice' {server.url}/capabilities", highlight=False
        )
        out.print(
            f"  webhooks: POST {server.url}/webhooks/<source>, signed as Standard Webhooks with the secret "
            f"{webhook_secret!r} (see missions.service.triggers.webhooks)",
            highlight=False,
        )
        out.print(f'  schedules: POST {server.url}/_dev/clock {{"advance_seconds": 3600}}', highlight=False)
        out.print(f"  repositories readable by path: {', '.join(roots)}", highlight=False)
        out.print(
            f"  operators (agent configurations): {', '.join(named) or 'none (--operator USER)'}", highlight=False
        )
        if retain_minutes is not None:
            out.print(
                f"  retention: ended missions archived and pruned after {retain_minutes:g} min (checked every "
                f"{every:g} s)",
                highlight=False,
            )
        out.print(f"  OpenAPI: {server.url}/openapi.json · Ctrl-C stops", highlight=False)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            out.print("stopping")
        finally:
            server.stop()
