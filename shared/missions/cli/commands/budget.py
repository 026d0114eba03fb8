"""`missions budget`: today's spend against a daily budget on an API; operators read and set anyone's."""

from __future__ import annotations

import json
from typing import Any

import typer

from .._console import fail, one_line, out
from .._target import JsonOption, Target, path, targeted

app = typer.Typer()


def _line(day: dict[str, Any]) -> str:
    if day["daily_budget_usd"] is None:
        return f"spent ${day['spent_usd']:.4f} on {day['day']} (UTC); no daily budget"
    line = f"spent ${day['spent_usd']:.4f} of ${day['daily_budget_usd']:.4f} on {day['day']} (UTC)"
    if day["reached"]:
        return f"{line}: the budget is spent; new missions wait until {day['resets_at']} or a raise"
    return f"{line}: ${day['remaining_usd']:.4f} left"


@app.command("budget")
@targeted()
def budget(
    user: str | None = typer.Argument(None, help="Another user's (operators); default: yours."),
    set_usd: float | None = typer.Option(None, "--set", min=0.0, help="Set the user's daily budget, in USD."),
    default: bool = typer.Option(False, "--default", help="Drop the user's own budget: the default applies."),
    as_json: JsonOption = False,
    *,
    target: Target,
) -> None:
    """Today's model spend against the daily budget; operators set a user's (a raise starts what waited)."""
    if set_usd is not None and default:
        fail("--set and --default are two different changes: pass one")
    changing = set_usd is not None or default
    with one_line():
        api = target.api()
        if user is None:
            if changing:
                fail("name the user whose budget to set (operators)")
            day = api.call("GET", "/me")["budget"]
        elif changing:
            day = api.call("PUT", path("users", user, "budget"), {"daily_budget_usd": set_usd})
        else:
            day = api.call("GET", path("users", user, "budget"))
    if as_json:
        out.print_json(json.dumps(day))
        return
    if day is None:
        fail("this API keeps no spend (no usage table)")
    whose = f"{user}: " if user is not None else ""
    out.print(whose + _line(day), highlight=False, soft_wrap=True)
    if day.get("started"):
        out.print(f"started {len(day['started'])} held missions: {', '.join(day['started'])}", highlight=False)
