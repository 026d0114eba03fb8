"""`missions`: run missions on the embedded emulation or a deployed API, list capabilities, print compiled ASL.

One module per command group (Typer's "one file per command"): each defines its own `app`, and this one
adds them in the order `missions --help` lists them: the groups without a name first (their commands are
the top level's), then the named ones. The root callback puts the Wiring (what the commands that call an
API go through) in the context once; the options naming the API (--env, --api-url, --token, --region)
are declared once, in `_target`.
"""

from __future__ import annotations

import os
import sys

import typer
from rich.markup import escape

from ._console import err
from ._wiring import Wiring
from .commands import (
    agents,
    budget,
    capabilities,
    chat,
    dev,
    login,
    mcp,
    me,
    missions,
    new,
    repos,
    run,
    schedules,
    tools,
)

__all__ = ["Wiring", "app", "main"]

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Run long-running LLM missions on a local emulation of their AWS deployment, or on a deployed stack.",
)
app.add_typer(capabilities.app)
app.add_typer(run.app)
app.add_typer(dev.app)
app.add_typer(missions.app)
app.add_typer(chat.app)
app.add_typer(login.app)
app.add_typer(repos.app, name="repos")
app.add_typer(me.app, name="me")
app.add_typer(budget.app)
app.add_typer(mcp.app)
app.add_typer(schedules.app, name="schedules")
app.add_typer(agents.app, name="agents")
app.add_typer(new.app, name="new")
app.add_typer(tools.app, name="tools")


@app.callback()
def _wiring(ctx: typer.Context) -> None:
    # a test hands its own Wiring as typer's `obj`; otherwise the real one
    ctx.ensure_object(Wiring)


def main() -> None:
    """Entry point: user errors are one line; unexpected ones too unless MISSIONS_DEBUG is set."""
    try:
        app()
    except SystemExit:
        raise
    except Exception as exc:  # last resort: never a traceback for a user
        if os.environ.get("MISSIONS_DEBUG"):
            raise
        err.print(
            f"[bold red]error:[/] {type(exc).__name__}: {escape(str(exc))} (set MISSIONS_DEBUG=1 for details)",
            highlight=False,
        )
        sys.exit(1)
