"""How a mission shows in the terminal: its events as they happen, and the summary it ends with."""

from __future__ import annotations

import json
from typing import Any

from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from missions.core.mission.events import Event, EventType

from ._console import out

BOUND_REASONS = ("max_", "edge_limit:")


def render(event: Event) -> None:
    """One event as a line (the kinds a person follows; the others are not shown)."""
    p, stage = event.payload, event.stage
    kind = event.type
    if kind is EventType.AGENT_STARTED:
        out.print(f"[bold cyan]▶ {stage}[/] [dim](hop {p.get('hop', '?')})[/]", highlight=False)
    elif kind is EventType.TOOL_STARTED:
        out.print(
            f"   ↳ [magenta]{p['tool']}[/] [dim]{escape(json.dumps(p.get('params', {}))[:110])}[/]", highlight=False
        )
    elif kind is EventType.TOOL_COMPLETED:
        mark = "[green]✓[/]" if p["status"] == "success" else f"[red]✗ {p['status']}[/]"
        detail = escape(p.get("error") or f"{p.get('citations', 0)} citation(s)")
        out.print(f"     {mark} [dim]{detail} · {p.get('duration_ms', 0):.0f} ms[/]", highlight=False)
    elif kind is EventType.CRITIC_DECISION:
        out.print(f"   ⚖  [yellow]{p.get('decision')}[/] {escape(str(p.get('reason', '')))}", highlight=False)
    elif kind is EventType.STAGE_TRANSITION:
        out.print(f"   [dim]→ {p.get('to_stage')}[/]", highlight=False)
    elif kind is EventType.BOUND_REACHED:
        out.print(f"[bold yellow]⚠ bound reached: {p.get('reason')}[/]", highlight=False)
    elif kind is EventType.INTERRUPT_RAISED and p.get("kind") == "delegation":  # a sub-mission, not a question
        out.print(f"[bold]⇢ handing over:[/] {escape(str(p.get('question')))}", highlight=False)
    elif kind is EventType.INTERRUPT_RAISED:
        out.print(f"[bold]⏸ waiting for you:[/] {escape(str(p.get('question')))}", highlight=False)
    elif kind is EventType.DELEGATION_STARTED:
        out.print(f"   ↳ [cyan]{p.get('capability')}[/] sub-mission {p.get('child')} started", highlight=False)
    elif kind is EventType.DELEGATION_ENDED:
        child = f" {p['child']}" if p.get("child") else ""
        status = p.get("status")
        mark = "[green]✓[/]" if status == "completed" else f"[red]✗ {escape(str(status))}[/]"
        out.print(
            f"   ↲ {mark} [cyan]{p.get('capability')}[/] sub-mission{child}: {escape(str(p.get('reason')))}",
            highlight=False,
        )
    elif kind is EventType.INTERRUPT_ANSWERED:
        out.print(f"[bold]▶ resumed[/] [dim]{escape(json.dumps(p.get('response')))}[/]", highlight=False)
    elif kind is EventType.FLOW_ERROR:
        detail = escape(str(p.get("message") or p.get("cause") or ""))
        out.print(f"[bold red]✗ {stage}: {escape(str(p.get('error') or p.get('reason')))}[/] {detail}", highlight=False)


def succeeded(status: str, terminal_reason: str | None, done: str) -> bool:
    """`run`'s exit code 0: the mission ended `done` (SUCCEEDED locally, completed on an API) and either
    completed or stopped at one of its bounds."""
    reason = terminal_reason or ""
    return status == done and (reason == "completed" or reason.startswith(BOUND_REASONS))


def print_summary(summary: dict[str, Any]) -> None:
    """The answer in a panel, then what the mission cost and did (as `run` prints it, locally or on an API)."""
    answer = summary["answer"] or "(no answer)"
    out.print(Panel(Text(answer), title="answer", expand=False))
    reason = summary["terminal_reason"]
    style = "green" if reason == "completed" else "yellow" if str(reason).startswith(BOUND_REASONS) else "red"
    c = summary["counters"]
    table = Table(show_header=False, box=None)
    table.add_row("terminal reason", f"[{style}]{reason}[/]")
    table.add_row("stages", f"{c.get('agent_hops')} ({' → '.join(summary['stages'])})")
    table.add_row("LLM calls", str(c.get("llm_calls")))
    table.add_row("tokens", f"{c.get('tokens_in')} in / {c.get('tokens_out')} out")
    table.add_row("tool calls", str(c.get("tool_calls")))
    table.add_row("citations", str(len(summary["citations"])))
    table.add_row("cost", f"${c.get('cost_usd', 0):.6f} (model)")
    table.add_row("wall time", f"{summary['wall_seconds']:.2f} s")
    out.print(table, highlight=False)
    for error in summary["errors"]:
        out.print(
            f"[red]error[/] {escape(error['stage'])}: {escape(error['kind'])}: {escape(error['message'])}",
            highlight=False,
        )
    if summary.get("error"):
        out.print(
            f"[red]execution {summary['status']}[/]: {escape(str(summary['error']))} "
            f"{escape(str(summary.get('cause') or ''))}",
            highlight=False,
        )
