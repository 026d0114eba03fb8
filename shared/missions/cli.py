"""`missions`: run missions on the embedded emulation, list capabilities, print compiled ASL."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any, Literal, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from missions.core import capability as registry
from missions.core.compiler import compile_json
from missions.core.envelope import InterruptKind, InterruptResponse
from missions.core.events import Event, EventType

if TYPE_CHECKING:
    from missions.core.llm import LLMProvider
    from missions.local.emulation import LocalCloud

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Run long-running LLM missions on a local emulation of their AWS deployment.",
)
out = Console()
err = Console(stderr=True)
BOUND_REASONS = ("max_", "edge_limit:")


class CliError(Exception):
    """A user-facing problem: printed as one line, exit code 2."""


def fail(message: str, code: int = 2) -> NoReturn:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)  # one line, however long
    raise typer.Exit(code)


def _capability(name: str) -> registry.Capability:
    try:
        return registry.load(name)
    except registry.UnknownCapability as exc:
        fail(str(exc))


@app.command("capabilities")
def capabilities(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List the installed capabilities."""
    found = [c.describe() for c in registry.load_all()]
    if as_json:
        out.print_json(data=found)
        return
    table = Table("capability", "stages", "LLM stages", "tools", "description")
    for c in found:
        table.add_row(
            c["name"], " → ".join(c["stages"]), str(len(c["llm_stages"])), str(len(c["tools"])), c["description"]
        )
    out.print(table)


@app.command("classify")
def classify(
    goal: str = typer.Argument(..., help="The goal to classify."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Which capability would take a goal, and its complexity (1 simple, 2 coordinated, 3 complex)."""
    from missions.adapters.llm.scripted import ScriptedProvider
    from missions.core.classification import classify_complexity, offline_goal_analysis, select_by_keywords

    if not goal.strip():
        fail("the goal is empty")
    settings = _llm_settings()
    llm: LLMProvider
    source: Literal["llm", "offline"]
    if settings.get("llm_provider") == "openai":
        from missions.adapters.llm.openai_provider import OpenAIProvider

        key = settings.get("openai_api_key")
        llm = OpenAIProvider(
            api_key=key or "not-needed",
            base_url=settings.get("openai_base_url"),
            default_model=settings.get("openai_default_model", "gpt-4o-mini"),
        )
        source = "llm"
    else:
        llm, source = ScriptedProvider(offline_goal_analysis), "offline"
    result = classify_complexity(goal, llm, source=source)
    capability = select_by_keywords(goal, [(c.name, [*c.keywords, *c.triggers.keywords]) for c in registry.load_all()])
    found = {"capability": capability, **result.model_dump(mode="json")}
    if as_json:
        out.print_json(data=found)
        return
    names = {1: "simple", 2: "coordinated", 3: "complex"}
    out.print(f"level {result.level} ({names[result.level]}), capability: {capability or 'none matched'}")
    out.print(f"[dim]{result.analysis.model_dump()} ({result.source})[/]")


@app.command("asl")
def asl(
    capability: str = typer.Argument(..., help="Capability name."),
    output: str | None = typer.Option(None, "--out", "-o", help="Write to this file instead of stdout."),
) -> None:
    """Print a capability's compiled Amazon States Language definition."""
    text = compile_json(_capability(capability).pipeline)
    if output:
        with open(output, "w") as handle:
            handle.write(text + "\n")
        err.print(f"wrote {output}")
    else:
        sys.stdout.write(text + "\n")


@app.command("run")
def run(
    capability: str = typer.Argument(..., help="Capability to run, e.g. code_analysis."),
    goal: str = typer.Argument(..., help="What the mission should achieve."),
    repo: str | None = typer.Option(
        None, "--repo", help="Repository on this machine to analyze (code_analysis; default: the current directory)."
    ),
    context: str | None = typer.Option(None, "--context", help="Extra mission context as a JSON object."),
    max_agent_hops: int | None = typer.Option(None, min=2, help="Bound: stages a mission may run."),
    max_llm_calls: int | None = typer.Option(None, min=0, help="Bound: LLM calls."),
    max_iterations: int | None = typer.Option(None, min=1, help="Bound: planning iterations."),
    max_tool_calls: int | None = typer.Option(None, min=0, help="Bound: tool calls."),
    max_cost_usd: float | None = typer.Option(None, min=0.0, help="Bound: model spend in USD."),
    answers: list[str] = typer.Option([], "--answer", help="Answer the next interrupt with this (repeatable)."),
    offline: bool = typer.Option(False, "--offline", help="Use the scripted model even if OPENAI_API_KEY is set."),
    timeout: float = typer.Option(600.0, min=1.0, help="Seconds to wait for the mission."),
    as_json: bool = typer.Option(False, "--json", help="Print the outcome as JSON, no progress."),
) -> None:
    """Run a mission on the embedded emulation, showing its progress, and print the answer."""
    _capability(capability)
    ctx = _parse_context(context)
    # on one's own machine the repository named is the one root missions may read
    root = os.path.abspath(os.path.expanduser(repo)) if repo is not None else os.getcwd()
    if repo is not None:
        ctx["repo"] = root
    bounds = {
        k: v
        for k, v in {
            "max_agent_hops": max_agent_hops,
            "max_llm_calls": max_llm_calls,
            "max_iterations": max_iterations,
            "max_tool_calls": max_tool_calls,
            "max_cost_usd": max_cost_usd,
        }.items()
        if v is not None
    }
    from missions.core.errors import MissionRequestError
    from missions.local.emulation import LocalCloud

    llm = {} if offline else _llm_settings()
    started = time.perf_counter()
    with LocalCloud([capability], settings={**llm, "repo_roots": _repo_roots([root])}) as cloud:
        try:
            mission_id = cloud.start(capability, goal, context=ctx, bounds=bounds)
        except MissionRequestError as exc:
            fail(str(exc))
        if not as_json:
            model = (
                llm.get("openai_default_model", "an OpenAI-compatible model") if llm else "the offline scripted model"
            )
            out.print(f"[bold]mission[/] {mission_id} · [cyan]{capability}[/] · {model}", highlight=False)
        status = _follow(cloud, mission_id, list(answers), timeout, quiet=as_json)
        outcome = cloud.outcome(mission_id)
        record = cloud.runtime.missions.get(mission_id)
    elapsed = time.perf_counter() - started
    summary = _summary(outcome, record, elapsed)
    if as_json:
        sys.stdout.write(json.dumps(summary, indent=2, default=str) + "\n")
    else:
        _print_summary(summary)
    reason = summary["terminal_reason"] or ""
    ok = status == "SUCCEEDED" and (reason == "completed" or reason.startswith(BOUND_REASONS))
    raise typer.Exit(0 if ok else 1)


@app.command("dev")
def dev(
    port: int = typer.Option(8787, min=1, max=65535, help="Port on 127.0.0.1."),
    webhook_secret: str = typer.Option(
        "whsec_ZGV2LXNlY3JldA==", help="Secret (Standard Webhooks: whsec_<base64>) of every local webhook source."
    ),
    repo_roots: list[str] = typer.Option(
        [],
        "--repo-root",
        help="A directory whose repositories missions may read by path (repeatable; default: the current directory).",
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
    llm = _llm_settings()
    roots = _repo_roots(repo_roots or [os.getcwd()])
    with LocalCloud(settings={**llm, "webhook_sources": sources, "repo_roots": roots}) as cloud:
        try:
            server = DevServer(cloud, port=port).start()
        except OSError as exc:
            fail(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}")
        out.print(
            f"[bold]missions dev[/] on {server.url} · {len(capabilities)} capabilities · "
            f"{'OpenAI' if llm else 'offline scripted model'}",
            highlight=False,
        )
        out.print(f"  auth (dev mode only): Authorization: Bearer {DEV_TOKEN_PREFIX}<user>", highlight=False)
        out.print(
            f"  try: curl -H 'Authorization: Bearer {DEV_TOKEN_PREFIX}alice' {server.url}/capabilities", highlight=False
        )
        out.print(
            f"  webhooks: POST {server.url}/webhooks/<source>, signed as Standard Webhooks with the secret "
            f"{webhook_secret!r} (see missions.service.webhooks)",
            highlight=False,
        )
        out.print(f'  schedules: POST {server.url}/_dev/clock {{"advance_seconds": 3600}}', highlight=False)
        out.print(f"  repositories readable by path: {', '.join(roots)}", highlight=False)
        out.print(f"  OpenAPI: {server.url}/openapi.json · Ctrl-C stops", highlight=False)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            out.print("stopping")
        finally:
            server.stop()


# -- repositories, through the HTTP API ------------------------------------------------------------

repos = typer.Typer(no_args_is_help=True, help="Register, list and delete repositories missions may read.")
app.add_typer(repos, name="repos")
API_URL_HELP = "The API's base URL (env MISSIONS_API_URL; default: a local `missions dev`)."
TOKEN_HELP = "Bearer token (env MISSIONS_TOKEN); with `missions dev`, 'dev:<user>' (default: dev:$USER)."


def _api_options(api_url: str | None, token: str | None) -> tuple[str, str]:
    url = api_url or os.environ.get("MISSIONS_API_URL") or "http://127.0.0.1:8787"
    bearer = token or os.environ.get("MISSIONS_TOKEN") or f"dev:{os.environ.get('USER') or 'local'}"
    return url.rstrip("/"), bearer


def _http(method: str, url: str, token: str | None, body: Any = None, data: bytes | None = None) -> tuple[int, Any]:
    import urllib.error
    import urllib.request

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            raw = response.read()
            status = response.status
    except urllib.error.HTTPError as exc:
        raw, status = exc.read(), exc.code
    except (urllib.error.URLError, OSError) as exc:
        fail(f"cannot reach {url}: {getattr(exc, 'reason', exc)}")
    try:
        return status, json.loads(raw) if raw else None
    except json.JSONDecodeError:
        return status, raw.decode(errors="replace")


def _checked(status: int, body: Any, ok: tuple[int, ...]) -> Any:
    if status not in ok:
        message = body.get("message") if isinstance(body, dict) else body
        fail(f"HTTP {status}: {message}")
    return body


def _archive_of(source: str, scratch: str) -> tuple[str, str]:
    """(path, format) of what to upload: an archive as it is, or a directory packed as a snapshot is."""
    from pathlib import Path

    path = Path(source).expanduser()
    if path.is_dir():
        from missions.service.repositories.archive import ArchiveRejected, snapshot_from_directory

        try:
            return str(snapshot_from_directory(path, Path(scratch) / "upload.tar.gz").path), "tar.gz"
        except ArchiveRejected as exc:
            fail(f"{source}: {exc}")
    if path.name.endswith((".tar.gz", ".tgz")):
        return str(path), "tar.gz"
    if path.name.endswith(".zip"):
        return str(path), "zip"
    fail(f"{source}: not a git URL, a directory, a .tar.gz or a .zip")


@repos.command("add")
def repos_add(
    source: str = typer.Argument(..., help="A git URL (https://...), a directory, or a .tar.gz / .zip archive."),
    name: str | None = typer.Option(None, "--name", help="How the repository is listed."),
    ref: str | None = typer.Option(None, "--ref", help="Git branch, tag or commit (default: the remote HEAD)."),
    shared: bool = typer.Option(False, "--shared", help="Operators: readable by every user."),
    wait: float = typer.Option(300.0, "--wait", min=0.0, help="Seconds to wait for the import (0: do not wait)."),
    api_url: str | None = typer.Option(None, "--api-url", help=API_URL_HELP),
    token: str | None = typer.Option(None, "--token", help=TOKEN_HELP),
) -> None:
    """Register a repository from a git URL, or upload a directory or archive; prints its id when ready."""
    import tempfile

    base, bearer = _api_options(api_url, token)
    named = {"name": name} if name else {}
    with tempfile.TemporaryDirectory() as scratch:
        if source.startswith(("https://", "http://", "file://")):
            body: dict[str, Any] = {"url": source, "shared": shared, **named, **({"ref": ref} if ref else {})}
            record = _checked(*_http("POST", f"{base}/repositories", bearer, body), ok=(202,))
        else:
            path, fmt = _archive_of(source, scratch)
            size = os.path.getsize(path)
            body = {"upload": {"format": fmt, "size_bytes": size}, "shared": shared, **named}
            record = _checked(*_http("POST", f"{base}/repositories", bearer, body), ok=(201,))
            with open(path, "rb") as handle:
                _checked(*_http("PUT", record["upload"]["url"], None, data=handle.read()), ok=(200,))
            record = _checked(
                *_http("POST", f"{base}/repositories/{record['repository_id']}/imports", bearer, {}), ok=(202,)
            )
    record = _wait_for_import(base, bearer, record, wait)
    out.print(_repository_line(record), highlight=False)
    if record["status"] == "failed":
        raise typer.Exit(1)


def _wait_for_import(base: str, bearer: str, record: dict[str, Any], wait: float) -> dict[str, Any]:
    deadline = time.monotonic() + wait
    while record["status"] == "importing" and time.monotonic() < deadline:
        time.sleep(0.5)
        record = _checked(*_http("GET", f"{base}/repositories/{record['repository_id']}", bearer), ok=(200,))
    return record


def _repository_line(record: dict[str, Any]) -> str:
    current = (record.get("snapshots") or [{}])[-1]
    version = (current.get("commit") or current.get("sha256") or "")[:12]
    detail = record.get("reason") or (f"{current.get('files', 0)} files, {version}" if current else "")
    shared = " (shared)" if record.get("shared") else ""
    return f"{record['repository_id']}  {record['name']}{shared}  {record['status']}  {detail}".rstrip()


@repos.command("list")
def repos_list(
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    api_url: str | None = typer.Option(None, "--api-url", help=API_URL_HELP),
    token: str | None = typer.Option(None, "--token", help=TOKEN_HELP),
) -> None:
    """Your repositories and the shared ones."""
    base, bearer = _api_options(api_url, token)
    found = _checked(*_http("GET", f"{base}/repositories", bearer), ok=(200,))["repositories"]
    if as_json:
        out.print_json(data=found)
        return
    for record in found:
        out.print(_repository_line(record), highlight=False)


@repos.command("rm")
def repos_rm(
    repository_id: str = typer.Argument(..., help="The repository's id."),
    api_url: str | None = typer.Option(None, "--api-url", help=API_URL_HELP),
    token: str | None = typer.Option(None, "--token", help=TOKEN_HELP),
) -> None:
    """Delete a repository and its snapshots."""
    base, bearer = _api_options(api_url, token)
    _checked(*_http("DELETE", f"{base}/repositories/{repository_id}", bearer), ok=(204,))
    out.print(f"deleted {repository_id}")


def _repo_roots(paths: list[str]) -> list[str]:
    from missions.core.roots import AllowedRoots, PathRefused

    for path in paths:
        if not os.path.isdir(os.path.expanduser(path)):
            fail(f"{path} is not a directory")
    try:
        return [str(root) for root in AllowedRoots.of(paths).roots]
    except PathRefused as exc:
        fail(str(exc))


def _parse_context(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"--context is not valid JSON: {exc.msg}")
    if not isinstance(value, dict):
        fail("--context must be a JSON object")
    return value


def _llm_settings() -> dict[str, Any]:
    """OPENAI_API_KEY or OPENAI_BASE_URL switches the runtime to the OpenAI provider."""
    key, base = os.environ.get("OPENAI_API_KEY"), os.environ.get("OPENAI_BASE_URL")
    if not key and not base:
        return {}
    settings: dict[str, Any] = {"llm_provider": "openai", "openai_api_key": key, "openai_base_url": base}
    if os.environ.get("MISSIONS_OPENAI_DEFAULT_MODEL"):
        settings["openai_default_model"] = os.environ["MISSIONS_OPENAI_DEFAULT_MODEL"]
    if os.environ.get("MISSIONS_OPENAI_MODELS"):
        try:
            settings["openai_models"] = json.loads(os.environ["MISSIONS_OPENAI_MODELS"])
        except json.JSONDecodeError:
            fail("MISSIONS_OPENAI_MODELS must be a JSON object of role -> model")
    return settings


def _follow(cloud: LocalCloud, mission_id: str, answers: list[str], timeout: float, quiet: bool) -> str:
    """Stream events until the execution ends, answering interrupts as they come."""
    cursor: str | None = None
    deadline = time.monotonic() + timeout
    answered: set[str] = set()
    while True:
        events, cursor = cloud.events(mission_id, after=cursor)
        if not quiet:
            for event in events:
                _render(event)
        status = cloud.status(mission_id)
        if status in ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED", "NEVER_STARTED"):
            events, cursor = cloud.events(mission_id, after=cursor)
            if not quiet:
                for event in events:
                    _render(event)
            return status
        for record in cloud.runtime.interrupts.pending(mission_id):
            if record.interrupt_id not in answered:
                response = _ask(record, answers, quiet)
                cloud.answer(mission_id, record.interrupt_id, response)
                answered.add(record.interrupt_id)
        if time.monotonic() > deadline:
            fail(f"mission {mission_id} did not finish within {timeout:.0f}s", code=1)
        time.sleep(0.05)


def _ask(record: Any, answers: list[str], quiet: bool) -> InterruptResponse:
    kind = InterruptKind(record.kind)
    if answers:
        text = answers.pop(0)
    elif not sys.stdin.isatty() and quiet:
        fail(f"the mission asks: {record.question!r}; pass --answer to answer it non-interactively")
    else:
        options = f" [{'/'.join(record.options)}]" if record.options else ""
        hint = " [y/n]" if kind in (InterruptKind.CONFIRMATION, InterruptKind.AGENT_REVIEW) else options
        try:
            text = typer.prompt(f"? {record.question}{hint}", err=True)
        except (typer.Abort, EOFError):
            fail(f"the mission asks: {record.question!r}; no answer was given (use --answer)")
    return _response(kind, text, record.options)


def _response(kind: InterruptKind, text: str, options: list[str]) -> InterruptResponse:
    text = text.strip()
    if kind is InterruptKind.CONFIRMATION:
        return InterruptResponse(approved=text.lower() in ("y", "yes", "true", "approve", "ok"), text=text)
    if kind is InterruptKind.AGENT_REVIEW:
        if text.lower() in ("y", "yes", "approve", "ok"):
            return InterruptResponse(approved=True)
        return InterruptResponse(approved=False, decision="revise", text=text)
    if kind is InterruptKind.CHOICE:
        if text.isdigit() and 1 <= int(text) <= len(options):
            text = options[int(text) - 1]
        return InterruptResponse(decision=text)
    return InterruptResponse(text=text)


def _render(event: Event) -> None:
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
    elif kind is EventType.INTERRUPT_RAISED:
        out.print(f"[bold]⏸ waiting for you:[/] {escape(str(p.get('question')))}", highlight=False)
    elif kind is EventType.INTERRUPT_ANSWERED:
        out.print(f"[bold]▶ resumed[/] [dim]{escape(json.dumps(p.get('response')))}[/]", highlight=False)
    elif kind is EventType.FLOW_ERROR:
        detail = escape(str(p.get("message") or p.get("cause") or ""))
        out.print(f"[bold red]✗ {stage}: {escape(str(p.get('error') or p.get('reason')))}[/] {detail}", highlight=False)


def _summary(outcome: Any, record: Any, elapsed: float) -> dict[str, Any]:
    envelope = outcome.envelope
    final = envelope.output(envelope.history[-1].stage) if envelope and envelope.history else {}
    counters = envelope.counters.model_dump() if envelope else record.counters
    return {
        "mission_id": outcome.mission_id,
        "status": outcome.status,
        "mission_status": record.status,
        "terminal_reason": envelope.terminal_reason if envelope else record.terminal_reason,
        "answer": final.get("answer"),
        "citations": final.get("citations", []),
        "counters": counters,
        "stages": [h.stage for h in envelope.history] if envelope else [],
        "errors": [e.model_dump() for e in envelope.errors] if envelope else [],
        "error": outcome.error,
        "cause": outcome.cause,
        "wall_seconds": round(elapsed, 3),
    }


def _print_summary(summary: dict[str, Any]) -> None:
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
    if summary["error"]:
        out.print(
            f"[red]execution {summary['status']}[/]: {escape(str(summary['error']))} "
            f"{escape(str(summary['cause'] or ''))}",
            highlight=False,
        )


new = typer.Typer(no_args_is_help=True, help="Make new things from templates that run as made.")
app.add_typer(new, name="new")


@new.command("capability")
def new_capability(
    name: str = typer.Argument(..., help="The capability's name (lowercase, digits, _)."),
    directory: str | None = typer.Option(None, "--dir", help="The capabilities package (default: the installed one)."),
) -> None:
    """Scaffold a capability: capability.toml and typed stages that run offline as generated."""
    from pathlib import Path

    from missions.local.scaffold import ScaffoldError
    from missions.local.scaffold import new_capability as scaffold

    if directory is None:  # the installed capabilities package, found without importing it
        import importlib.util

        spec = importlib.util.find_spec("capabilities")
        locations = list(spec.submodule_search_locations or []) if spec else []
        if not locations:
            fail("no capabilities package is installed here: give --dir")
        directory = locations[0]
    try:
        written = scaffold(name, Path(directory))
    except ScaffoldError as exc:
        fail(str(exc))
    for path in written:
        out.print(f"wrote {path}")
    out.print(f'try it: missions run {name} "{name.replace("_", " ")}"')


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


if __name__ == "__main__":
    main()
