"""`missions agents`: versioned agent configurations on an API (operators write, everyone reads)."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.markup import escape

from .._console import fail, one_line, out
from .._target import JsonOption, Target, path, targeted

app = typer.Typer(
    no_args_is_help=True,
    help="Versioned agent configurations: list, show, create, promote, roll back (operators write).",
)
Capability = typer.Argument(..., help="The capability.")
Agent = typer.Argument(..., help="The agent.")


def _agent_line(agent: dict[str, Any]) -> str:
    state = "enabled" if agent["enabled"] else "DISABLED"
    return (
        f"{agent['agent']:<14} v{agent['active']} active (latest v{agent['latest']})  {state}  by {agent['updated_by']}"
    )


def _write(target: Target, parts: list[str], body: Any = None) -> dict[str, Any]:
    with one_line():
        return target.api().call("POST", path("agents", *parts), body)  # type: ignore[no-any-return]


@app.command("list")
@targeted()
def list_agents(capability: str = Capability, as_json: JsonOption = False, *, target: Target) -> None:
    """Each agent of a capability with the version new missions run, and the models a mission may name."""
    with one_line():
        found = target.api().call("GET", path("agents", capability))
    if as_json:
        out.print_json(data=found)
        return
    for agent in found["agents"]:
        out.print(escape(_agent_line(agent)), highlight=False)
    out.print(f"models a mission may name: {', '.join(found['models']) or 'none'}", highlight=False)


@app.command("show")
@targeted()
def show(
    capability: str = Capability,
    agent: str = typer.Argument(..., help="The agent (a stage of its pipeline)."),
    version: int | None = typer.Option(None, "--version", min=1, help="One version, whole (default: all, listed)."),
    as_json: JsonOption = False,
    *,
    target: Target,
) -> None:
    """An agent's versions (or one version whole, with its prompt)."""
    api = target.api()
    with one_line():
        if version is not None:
            found = api.call("GET", path("agents", capability, agent, "versions", str(version)))
        else:
            found = api.call("GET", path("agents", capability, agent))
    if as_json or version is not None:
        out.print_json(data=found)
        return
    out.print(escape(_agent_line(found)), highlight=False)
    for entry in found["versions"]:
        mark = "*" if entry["version"] == found["active"] else " "
        line = f"{mark} v{entry['version']}  {entry['created_at'][:19]}  {entry['created_by']}  {entry['source']}"
        out.print(escape(f"{line}  {entry['note']}".rstrip()), highlight=False)


@app.command("create")
@targeted()
def create(
    capability: str = Capability,
    agent: str = Agent,
    prompt: str | None = typer.Option(None, "--prompt", help="The prompt template ({{agent}}, {{capability}}...)."),
    prompt_file: str | None = typer.Option(None, "--prompt-file", help="Read the prompt template from a file."),
    model: str | None = typer.Option(None, "--model", help="A model with a known price."),
    fallback_model: str | None = typer.Option(None, "--fallback-model", help="Asked when the model keeps failing."),
    temperature: float | None = typer.Option(None, "--temperature", min=0.0, max=2.0),
    max_tokens: int | None = typer.Option(None, "--max-tokens", min=1),
    tools: str | None = typer.Option(None, "--tools", help="Enabled tools, comma-separated (within the stage's)."),
    based_on: int | None = typer.Option(None, "--based-on", min=1, help="The version to change (default: active)."),
    note: str = typer.Option("", "--note", help="Why (kept with the version and in the audit trail)."),
    *,
    target: Target,
) -> None:
    """Create a version (operators): the given settings over the active version; promote it to use it."""
    if prompt is not None and prompt_file is not None:
        fail("--prompt and --prompt-file: give one")
    if prompt_file is not None:
        try:
            with open(prompt_file, encoding="utf-8") as handle:
                prompt = handle.read()
        except OSError as exc:
            fail(f"--prompt-file: {exc.strerror}: {prompt_file}")
    given = {
        "prompt": prompt,
        "model": model,
        "fallback_model": fallback_model,
        "temperature": temperature,
        "max_tokens": max_tokens,
        "tools": [t.strip() for t in tools.split(",") if t.strip()] if tools is not None else None,
        "based_on": based_on,
    }
    body: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    if note:
        body["note"] = note
    with one_line():
        created = target.api().call("POST", path("agents", capability, agent, "versions"), body, ok=(201,))
    out.print(f"created {capability}/{agent} v{created['version']} (promote it: missions agents promote "
              f"{capability} {agent} {created['version']})", highlight=False)  # fmt: skip


@app.command("promote")
@targeted()
def promote(
    capability: str = Capability,
    agent: str = Agent,
    version: int = typer.Argument(..., min=1, help="The version new missions run from now on."),
    *,
    target: Target,
) -> None:
    """Make a version the one new missions run (operators); no deploy."""
    state = _write(target, [capability, agent, "promote"], {"version": version})
    out.print(escape(_agent_line(state)), highlight=False)


@app.command("rollback")
@targeted()
def rollback(capability: str = Capability, agent: str = Agent, *, target: Target) -> None:
    """Restore the version that was active before the current one (operators)."""
    state = _write(target, [capability, agent, "rollback"])
    out.print(escape(_agent_line(state)), highlight=False)


@app.command("clone")
@targeted()
def clone(
    capability: str = Capability,
    agent: str = Agent,
    version: int = typer.Argument(..., min=1, help="The version to copy into a new one."),
    note: str = typer.Option("", "--note", help="Why."),
    *,
    target: Target,
) -> None:
    """Copy a version into a new one (operators)."""
    created = _write(target, [capability, agent, "versions", str(version), "clone"], {"note": note})
    out.print(f"created {capability}/{agent} v{created['version']} ({created['source']})", highlight=False)


@app.command("enable")
@targeted()
def enable(
    capability: str = Capability,
    agent: str = Agent,
    disable: bool = typer.Option(False, "--disable", help="Disable it instead: no new mission starts."),
    *,
    target: Target,
) -> None:
    """Enable an agent (or --disable it: new missions of the capability are refused) (operators)."""
    state = _write(target, [capability, agent, "disable" if disable else "enable"])
    out.print(escape(_agent_line(state)), highlight=False)


@app.command("diff")
@targeted()
def diff(
    capability: str = Capability,
    agent: str = Agent,
    older: int = typer.Argument(..., min=1, help="One version."),
    newer: int = typer.Argument(..., min=1, help="The other."),
    *,
    target: Target,
) -> None:
    """What changed between two versions, field by field."""
    with one_line():
        found = target.api().call("GET", path("agents", capability, agent, "diff"), query={"from": older, "to": newer})
    if not found["changes"]:
        out.print(f"v{older} and v{newer} are the same", highlight=False)
    for name, change in found["changes"].items():
        out.print(escape(f"{name}: {change['from']!r} -> {change['to']!r}"), highlight=False, soft_wrap=True)


@app.command("audit")
@targeted()
def audit(capability: str = Capability, agent: str = Agent, *, target: Target) -> None:
    """Who changed the agent, when, and what (newest first)."""
    with one_line():
        found = target.api().call("GET", path("agents", capability, agent, "audit"))
    for entry in found["entries"]:
        detail = json.dumps(entry["detail"], sort_keys=True) if entry["detail"] else ""
        out.print(
            escape(f"{entry['at'][:19]}  {entry['actor']}  {entry['action']}  {detail}".rstrip()),
            highlight=False,
            soft_wrap=True,
        )
