"""`missions`: run missions on the embedded emulation or a deployed API, list capabilities, print compiled ASL."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn
from urllib.parse import quote

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from missions.client import (
    LOCAL_API,
    ApiClient,
    ClientError,
    Endpoints,
    Pkce,
    RedirectListener,
    Token,
    TokenCache,
    TokenEndpoint,
    Transport,
    code_from_redirect,
    config_dir,
    current_token,
    error_line,
    sign_in,
    stack_endpoints,
    urllib_transport,
)
from missions.core.capability import registry as registry
from missions.core.mission.envelope import InterruptKind, InterruptResponse
from missions.core.mission.events import Event, EventType
from missions.core.pipeline.compiler import compile_json

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

    from missions.core.llm.provider import LLMProvider
    from missions.local.emulation import LocalCloud

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Run long-running LLM missions on a local emulation of their AWS deployment, or on a deployed stack.",
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
    from missions.core.capability.classification import classify_complexity, offline_goal_analysis, select_by_keywords

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
    elif settings.get("llm_provider") == "anthropic":
        from missions.adapters.llm.anthropic_provider import AnthropicProvider

        llm = AnthropicProvider(
            api_key=settings.get("anthropic_api_key") or "not-needed",
            base_url=settings.get("anthropic_base_url"),
            default_model=settings.get("anthropic_default_model", "claude-haiku-4-5"),
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
    ctx: typer.Context,
    capability: str = typer.Argument(..., help="Capability to run, e.g. code_analysis."),
    goal: str = typer.Argument(..., help="What the mission should achieve."),
    repo: str | None = typer.Option(
        None,
        "--repo",
        help="Repository to analyze by path (code_analysis; locally default: the current directory; on an API, "
        "a path under its roots).",
    ),
    repository: str | None = typer.Option(
        None, "--repository", help="On an API (--api-url, --env): a registered repository's id (missions repos)."
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
    env: EnvOption = None,
    api_url: Annotated[
        str | None, typer.Option("--api-url", help="Run it on this API (`missions dev`, a deployment) instead.")
    ] = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Run a mission, showing its progress, and print the answer: on the embedded emulation, or on a
    deployed API with --env (or any API with --api-url)."""
    if env is not None or api_url is not None:
        local_only = {
            "--offline": offline or None,
            "--max-agent-hops": max_agent_hops,
            "--max-llm-calls": max_llm_calls,
            "--max-iterations": max_iterations,
            "--max-tool-calls": max_tool_calls,
        }
        given = [name for name, value in local_only.items() if value is not None]
        if given:
            fail(f"{', '.join(given)}: only on the emulation; an API runs its capability's bounds (--max-cost-usd)")
        remote_context = _parse_context(context)
        remote_context.update({k: v for k, v in (("repo", repo), ("repository", repository)) if v is not None})
        if not goal.strip():
            fail("the goal is empty")
        api = _api(ctx, env, api_url, token, region)
        sleep = _wiring(ctx).sleep
        _run_remote(api, sleep, capability, goal, remote_context, max_cost_usd, list(answers), timeout, as_json)
    if repository is not None:
        fail("--repository names a repository registered on an API: add --api-url or --env")
    _capability(capability)
    mission_context = _parse_context(context)
    # on one's own machine the repository named is the one root missions may read
    root = os.path.abspath(os.path.expanduser(repo)) if repo is not None else os.getcwd()
    if repo is not None:
        mission_context["repo"] = root
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
    from missions.service.checkpoints import stage_history

    llm = {} if offline else _llm_settings()
    started = time.perf_counter()
    with LocalCloud([capability], settings={**llm, "repo_roots": _repo_roots([root])}) as cloud:
        try:
            mission_id = cloud.start(capability, goal, context=mission_context, bounds=bounds)
        except MissionRequestError as exc:
            fail(str(exc))
        if not as_json:
            out.print(f"[bold]mission[/] {mission_id} · [cyan]{capability}[/] · {_model_label(llm)}", highlight=False)
        status = _follow(cloud, mission_id, list(answers), timeout, quiet=as_json)
        outcome = cloud.outcome(mission_id)
        record = cloud.runtime.missions.get(mission_id)
        ran = [r.stage for r in stage_history(cloud.runtime.checkpoints, mission_id)]  # read from its checkpoints
    elapsed = time.perf_counter() - started
    summary = _summary(outcome, record, elapsed, ran)
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
    operators: list[str] = typer.Option(
        [],
        "--operator",
        help="A user who may change agent configurations and share repositories (repeatable; "
        "default: MISSIONS_OPERATORS, a JSON list).",
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
    named = operators or _operators_from_env()
    settings = {**llm, "webhook_sources": sources, "repo_roots": roots, "operators": named}
    with LocalCloud(settings=settings) as cloud:
        try:
            server = DevServer(cloud, port=port).start()
        except OSError as exc:
            fail(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}")
        out.print(
            f"[bold]missions dev[/] on {server.url} · {len(capabilities)} capabilities · {_model_label(llm)}",
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
        out.print(f"  OpenAPI: {server.url}/openapi.json · Ctrl-C stops", highlight=False)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            out.print("stopping")
        finally:
            server.stop()


# -- a deployed API (or `missions dev`), over HTTP -------------------------------------------------

API_URL_HELP = "The API's base URL (env MISSIONS_API_URL; default: a local `missions dev`, or --env's stack's)."
TOKEN_HELP = "Bearer token (env MISSIONS_TOKEN; default: the one `missions login` cached, else dev:$USER)."
ENV_HELP = "A deployed environment: the API and its sign-in are read from stack missions-<env>'s outputs."
REGION_HELP = "The stack's AWS region (default: AWS_REGION, the profile's)."
EnvOption = Annotated[str | None, typer.Option("--env", help=ENV_HELP)]
ApiUrlOption = Annotated[str | None, typer.Option("--api-url", help=API_URL_HELP)]
TokenOption = Annotated[str | None, typer.Option("--token", help=TOKEN_HELP)]
RegionOption = Annotated[str | None, typer.Option("--region", help=REGION_HELP)]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
TERMINAL = ("completed", "failed", "cancelled", "archived")
POLL_SECONDS = 0.25


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


def _wiring(ctx: typer.Context) -> Wiring:
    return ctx.obj if isinstance(ctx.obj, Wiring) else Wiring()


@contextmanager
def _one_line() -> Iterator[None]:
    """A client's error (a refused call, an unreachable API, a missing stack) as the CLI's one line."""
    try:
        yield
    except ClientError as exc:
        fail(str(exc))


def _endpoints(wiring: Wiring, env: str | None, api_url: str | None, region: str | None) -> Endpoints:
    if env is None:
        return Endpoints(api_url or os.environ.get("MISSIONS_API_URL") or LOCAL_API)
    if not re.fullmatch(r"[a-z][a-z0-9-]{0,30}", env):
        fail(f"--env {env!r}: an environment is named like dev, staging or prod")
    with _one_line():
        found = stack_endpoints(env, wiring.cloudformation(region))
    return replace(found, api_url=api_url) if api_url else found


def _credentials(client_id: str | None = None, client_secret: str | None = None) -> tuple[str, str] | None:
    client_id = client_id or os.environ.get("MISSIONS_CLIENT_ID")
    client_secret = client_secret or os.environ.get("MISSIONS_CLIENT_SECRET")
    return (client_id, client_secret) if client_id and client_secret else None


def _api(ctx: typer.Context, env: str | None, api_url: str | None, token: str | None, region: str | None) -> ApiClient:
    """A client of the API named by --api-url or --env, with the token given, cached or taken with the
    client credentials in MISSIONS_CLIENT_ID/MISSIONS_CLIENT_SECRET; a local API gets dev:$USER."""
    wiring = _wiring(ctx)
    endpoints, bearer, hint = _signed_in(wiring, env, api_url, token, region)
    return ApiClient(endpoints.base, bearer, wiring.transport, wiring.sleep, hint)


def _signed_in(
    wiring: Wiring, env: str | None, api_url: str | None, token: str | None, region: str | None
) -> tuple[Endpoints, str, str]:
    """(where the API is, the bearer token to call it with, what a 401 should suggest): see `_api`."""
    endpoints = _endpoints(wiring, env, api_url, region)
    hint = f"sign in again: missions login --env {env}" if env else "pass --token, or sign in with missions login"
    bearer = token or os.environ.get("MISSIONS_TOKEN")
    if not bearer:
        with _one_line():
            bearer = _cached_token(wiring, endpoints, hint)
    if not bearer and env:
        fail(f"not signed in to {endpoints.stack}: missions login --env {env} (--browser for a person)")
    return endpoints, bearer or _dev_token(), hint


def _dev_token() -> str:
    return f"dev:{os.environ.get('USER') or 'local'}"


def _stream_base(wiring: Wiring, endpoints: Endpoints, stream_url: str | None) -> str:
    """Where the streaming routes answer: --stream-url, MISSIONS_STREAM_URL, the URL `missions login
    --stream-url` cached for the API, the stack's StreamUrl output, else the API's own URL (the dev server)."""
    found = (
        stream_url
        or os.environ.get("MISSIONS_STREAM_URL")
        or wiring.cache().stream_url(endpoints.api_url)
        or endpoints.stream_url
        or endpoints.api_url
    )
    return found.rstrip("/")


def _cached_token(wiring: Wiring, endpoints: Endpoints, hint: str) -> str | None:
    """The cached token (renewed when it is about to expire), else one taken with the client credentials
    in the environment; None when there is neither. A token that expired and cannot be renewed is an error,
    not a silent switch to another identity."""

    def endpoint(url: str) -> TokenEndpoint:
        return TokenEndpoint(url, wiring.transport, wiring.clock)

    cache, credentials = wiring.cache(), _credentials()
    cached = cache.get(endpoints.api_url)
    found = current_token(cache, endpoints.api_url, endpoint, wiring.clock(), credentials, endpoints.scope)
    if found is None and credentials and endpoints.token_url:  # a machine that never logged in: log in now
        found = endpoint(endpoints.token_url).client_credentials(*credentials, scope=endpoints.scope)
        cache.put(endpoints.api_url, found)
    if found is None and cached is not None:
        raise ClientError(f"the token cached for {endpoints.base} has expired; {hint}")
    return found.access_token if found else None


def _path(*parts: str) -> str:
    """A URL path of ids as given: quoted, so an id cannot reach another route."""
    return "/" + "/".join(quote(part, safe="") for part in parts)


# -- repositories ----------------------------------------------------------------------------------

repos = typer.Typer(no_args_is_help=True, help="Register, list and delete repositories missions may read.")
app.add_typer(repos, name="repos")


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
    ctx: typer.Context,
    source: str = typer.Argument(..., help="A git URL (https://...), a directory, or a .tar.gz / .zip archive."),
    name: str | None = typer.Option(None, "--name", help="How the repository is listed."),
    ref: str | None = typer.Option(None, "--ref", help="Git branch, tag or commit (default: the remote HEAD)."),
    shared: bool = typer.Option(False, "--shared", help="Operators: readable by every user."),
    wait: float = typer.Option(300.0, "--wait", min=0.0, help="Seconds to wait for the import (0: do not wait)."),
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Register a repository from a git URL, or upload a directory or archive; prints its id when ready."""
    import tempfile

    api = _api(ctx, env, api_url, token, region)
    named = {"name": name} if name else {}
    with tempfile.TemporaryDirectory() as scratch, _one_line():
        if source.startswith(("https://", "http://", "file://")):
            body: dict[str, Any] = {"url": source, "shared": shared, **named, **({"ref": ref} if ref else {})}
            record = api.call("POST", "/repositories", body, ok=(202,))
        else:
            path, fmt = _archive_of(source, scratch)
            size = os.path.getsize(path)
            body = {"upload": {"format": fmt, "size_bytes": size}, "shared": shared, **named}
            record = api.call("POST", "/repositories", body, ok=(201,))
            with open(path, "rb") as handle:
                api.upload(record["upload"]["url"], handle.read())
            record = api.call("POST", _path("repositories", record["repository_id"], "imports"), {}, ok=(202,))
        record = _wait_for_import(api, record, wait)
    out.print(_repository_line(record), highlight=False)
    if record["status"] == "failed":
        raise typer.Exit(1)


def _wait_for_import(api: ApiClient, record: dict[str, Any], wait: float) -> dict[str, Any]:
    deadline = time.monotonic() + wait
    while record["status"] == "importing" and time.monotonic() < deadline:
        time.sleep(0.5)
        record = api.call("GET", _path("repositories", record["repository_id"]))
    return record


def _repository_line(record: dict[str, Any]) -> str:
    current = (record.get("snapshots") or [{}])[-1]
    version = (current.get("commit") or current.get("sha256") or "")[:12]
    detail = record.get("reason") or (f"{current.get('files', 0)} files, {version}" if current else "")
    shared = " (shared)" if record.get("shared") else ""
    return f"{record['repository_id']}  {record['name']}{shared}  {record['status']}  {detail}".rstrip()


@repos.command("list")
def repos_list(
    ctx: typer.Context,
    as_json: JsonOption = False,
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Your repositories and the shared ones."""
    with _one_line():
        found = _api(ctx, env, api_url, token, region).call("GET", "/repositories")["repositories"]
    if as_json:
        out.print_json(data=found)
        return
    for record in found:
        out.print(_repository_line(record), highlight=False)


@repos.command("rm")
def repos_rm(
    ctx: typer.Context,
    repository_id: str = typer.Argument(..., help="The repository's id."),
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Delete a repository and its snapshots."""
    with _one_line():
        _api(ctx, env, api_url, token, region).call("DELETE", _path("repositories", repository_id), ok=(204,))
    out.print(f"deleted {repository_id}")


# -- your data ---------------------------------------------------------------------------------------

me = typer.Typer(no_args_is_help=True, help="Your data: export everything stored about you, or erase it.")
app.add_typer(me, name="me")


@me.command("export")
def me_export(
    ctx: typer.Context,
    output: str = typer.Option(
        "missions-export.jsonl", "--output", "-o", help="Where to write the JSON lines ('-': standard output)."
    ),
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Download everything stored about you (GET /me/export) as JSON lines."""
    with _one_line():
        data = _api(ctx, env, api_url, token, region).download("/me/export")
    if output == "-":
        sys.stdout.write(data.decode())
        return
    try:
        with open(output, "wb") as handle:
            handle.write(data)
    except OSError as exc:
        fail(f"{output}: {exc.strerror or exc}")
    records = max(data.count(b"\n") - 1, 0)
    out.print(f"exported {records} records to {output}", highlight=False)


@me.command("erase")
def me_erase(
    ctx: typer.Context,
    yes: bool = typer.Option(False, "--yes", help="Erase without asking: it cannot be undone."),
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Erase everything stored about you (DELETE /me): missions, memory, conversations, repositories."""
    if not yes:
        fail("erasing everything stored about you cannot be undone: pass --yes")
    with _one_line():
        report = _api(ctx, env, api_url, token, region).call("DELETE", "/me")
    erased = ", ".join(f"{n} {store}" for store, n in sorted(report["erased"].items()) if n) or "nothing was stored"
    out.print(f"erased {report['user_id']}: {erased}", highlight=False, soft_wrap=True)


# -- your schedules ----------------------------------------------------------------------------------

schedules_app = typer.Typer(
    no_args_is_help=True, help="Your own schedules: a mission of your goal at each firing of a cron or rate."
)
app.add_typer(schedules_app, name="schedules")


def _schedule_line(record: dict[str, Any]) -> str:
    upcoming = record.get("next_fire_times") or []
    when = f"next {upcoming[0]['local']}" if upcoming else "no firing ahead"
    label = f" {record['name']!r}" if record.get("name") else ""
    return (
        f"{record['schedule_id']}{label}  {record['state']}  {record['expression']} {record['timezone']}  "
        f"{record['capability']}  {when}  {record['goal'][:60]}"
    )


def _print_schedule(record: dict[str, Any], as_json: bool) -> None:
    if as_json:
        out.print_json(data=record)
        return
    out.print(escape(_schedule_line(record)), highlight=False, soft_wrap=True)
    for moment in record.get("next_fire_times") or []:
        out.print(f"  fires {moment['local']} ({moment['utc']})", highlight=False)
    for firing in record.get("firings") or []:
        what = firing.get("mission_id") or firing.get("reason") or ""
        out.print(escape(f"  fired {firing['scheduled_time']}: {firing['outcome']} {what}".rstrip()), highlight=False)


@schedules_app.command("create")
def schedules_create(
    ctx: typer.Context,
    expression: str = typer.Argument(..., help="cron(min hour day-of-month month day-of-week year), or rate(6 hours)."),
    goal: str = typer.Argument(..., help="The goal of each mission it starts."),
    timezone: str = typer.Option("UTC", "--timezone", "--tz", help="The IANA zone a cron is read in."),
    capability: str = typer.Option("auto", "--capability", help="A capability, or auto (chosen from the goal)."),
    name: str = typer.Option("", "--name", help="A label for you."),
    as_json: JsonOption = False,
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Create a schedule; prints its id and next firings (a bad expression: one line saying what is wrong)."""
    body = {"expression": expression, "goal": goal, "timezone": timezone, "capability": capability, "name": name}
    with _one_line():
        record = _api(ctx, env, api_url, token, region).call("POST", "/schedules", body, ok=(201,))
    _print_schedule(record, as_json)


@schedules_app.command("list")
def schedules_list(
    ctx: typer.Context,
    as_json: JsonOption = False,
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Your schedules, oldest first, each with its next firing."""
    with _one_line():
        found = _api(ctx, env, api_url, token, region).call("GET", "/schedules")
    if as_json:
        out.print_json(data=found)
        return
    for record in found["schedules"]:
        out.print(escape(_schedule_line(record)), highlight=False, soft_wrap=True)
    out.print(f"{len(found['schedules'])} of at most {found['limit']}", highlight=False)


def _schedule_command(ctx: typer.Context, api_args: tuple[Any, ...], method: str, *path: str) -> dict[str, Any]:
    with _one_line():
        found: dict[str, Any] = _api(ctx, *api_args).call(method, _path("schedules", *path))
    return found


@schedules_app.command("show")
def schedules_show(
    ctx: typer.Context,
    schedule_id: str = typer.Argument(..., help="The schedule's id."),
    as_json: JsonOption = False,
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """A schedule, its next firings and what its last firings did."""
    _print_schedule(_schedule_command(ctx, (env, api_url, token, region), "GET", schedule_id), as_json)


@schedules_app.command("pause")
def schedules_pause(
    ctx: typer.Context,
    schedule_id: str = typer.Argument(..., help="The schedule's id."),
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Pause a schedule: it fires no more until resumed."""
    _schedule_command(ctx, (env, api_url, token, region), "POST", schedule_id, "pause")
    out.print(f"paused {schedule_id}", highlight=False)


@schedules_app.command("resume")
def schedules_resume(
    ctx: typer.Context,
    schedule_id: str = typer.Argument(..., help="The schedule's id."),
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Resume a paused schedule from its next firing on."""
    record = _schedule_command(ctx, (env, api_url, token, region), "POST", schedule_id, "resume")
    upcoming = record.get("next_fire_times") or []
    out.print(f"resumed {schedule_id}" + (f", next {upcoming[0]['local']}" if upcoming else ""), highlight=False)


@schedules_app.command("delete")
def schedules_delete(
    ctx: typer.Context,
    schedule_id: str = typer.Argument(..., help="The schedule's id."),
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Delete a schedule (its missions already started go on)."""
    with _one_line():
        _api(ctx, env, api_url, token, region).call("DELETE", _path("schedules", schedule_id), ok=(204,))
    out.print(f"deleted {schedule_id}", highlight=False)


# -- agents as data: versioned agent configurations -----------------------------------------------

agents_app = typer.Typer(
    no_args_is_help=True,
    help="Versioned agent configurations: list, show, create, promote, roll back (operators write).",
)
app.add_typer(agents_app, name="agents")


def _agent_line(agent: dict[str, Any]) -> str:
    state = "enabled" if agent["enabled"] else "DISABLED"
    return (
        f"{agent['agent']:<14} v{agent['active']} active (latest v{agent['latest']})  {state}  by {agent['updated_by']}"
    )


@agents_app.command("list")
def agents_list(
    ctx: typer.Context,
    capability: str = typer.Argument(..., help="The capability."),
    as_json: JsonOption = False,
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Each agent of a capability with the version new missions run, and the models a mission may name."""
    with _one_line():
        found = _api(ctx, env, api_url, token, region).call("GET", _path("agents", capability))
    if as_json:
        out.print_json(data=found)
        return
    for agent in found["agents"]:
        out.print(escape(_agent_line(agent)), highlight=False)
    out.print(f"models a mission may name: {', '.join(found['models']) or 'none'}", highlight=False)


@agents_app.command("show")
def agents_show(
    ctx: typer.Context,
    capability: str = typer.Argument(..., help="The capability."),
    agent: str = typer.Argument(..., help="The agent (a stage of its pipeline)."),
    version: int | None = typer.Option(None, "--version", min=1, help="One version, whole (default: all, listed)."),
    as_json: JsonOption = False,
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """An agent's versions (or one version whole, with its prompt)."""
    api = _api(ctx, env, api_url, token, region)
    with _one_line():
        if version is not None:
            found = api.call("GET", _path("agents", capability, agent, "versions", str(version)))
        else:
            found = api.call("GET", _path("agents", capability, agent))
    if as_json or version is not None:
        out.print_json(data=found)
        return
    out.print(escape(_agent_line(found)), highlight=False)
    for entry in found["versions"]:
        mark = "*" if entry["version"] == found["active"] else " "
        line = f"{mark} v{entry['version']}  {entry['created_at'][:19]}  {entry['created_by']}  {entry['source']}"
        out.print(escape(f"{line}  {entry['note']}".rstrip()), highlight=False)


@agents_app.command("create")
def agents_create(
    ctx: typer.Context,
    capability: str = typer.Argument(..., help="The capability."),
    agent: str = typer.Argument(..., help="The agent."),
    prompt: str | None = typer.Option(None, "--prompt", help="The prompt template ({{agent}}, {{capability}}...)."),
    prompt_file: str | None = typer.Option(None, "--prompt-file", help="Read the prompt template from a file."),
    model: str | None = typer.Option(None, "--model", help="A model with a known price."),
    fallback_model: str | None = typer.Option(None, "--fallback-model", help="Asked when the model keeps failing."),
    temperature: float | None = typer.Option(None, "--temperature", min=0.0, max=2.0),
    max_tokens: int | None = typer.Option(None, "--max-tokens", min=1),
    tools: str | None = typer.Option(None, "--tools", help="Enabled tools, comma-separated (within the stage's)."),
    based_on: int | None = typer.Option(None, "--based-on", min=1, help="The version to change (default: active)."),
    note: str = typer.Option("", "--note", help="Why (kept with the version and in the audit trail)."),
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
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
    with _one_line():
        created = _api(ctx, env, api_url, token, region).call(
            "POST", _path("agents", capability, agent, "versions"), body, ok=(201,)
        )
    out.print(f"created {capability}/{agent} v{created['version']} (promote it: missions agents promote "
              f"{capability} {agent} {created['version']})", highlight=False)  # fmt: skip


def _agent_write(ctx: typer.Context, api_args: tuple[Any, ...], path: list[str], body: Any = None) -> dict[str, Any]:
    with _one_line():
        return _api(ctx, *api_args).call("POST", _path("agents", *path), body)  # type: ignore[no-any-return]


@agents_app.command("promote")
def agents_promote(
    ctx: typer.Context,
    capability: str = typer.Argument(..., help="The capability."),
    agent: str = typer.Argument(..., help="The agent."),
    version: int = typer.Argument(..., min=1, help="The version new missions run from now on."),
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Make a version the one new missions run (operators); no deploy."""
    state = _agent_write(ctx, (env, api_url, token, region), [capability, agent, "promote"], {"version": version})
    out.print(escape(_agent_line(state)), highlight=False)


@agents_app.command("rollback")
def agents_rollback(
    ctx: typer.Context,
    capability: str = typer.Argument(..., help="The capability."),
    agent: str = typer.Argument(..., help="The agent."),
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Restore the version that was active before the current one (operators)."""
    state = _agent_write(ctx, (env, api_url, token, region), [capability, agent, "rollback"])
    out.print(escape(_agent_line(state)), highlight=False)


@agents_app.command("clone")
def agents_clone(
    ctx: typer.Context,
    capability: str = typer.Argument(..., help="The capability."),
    agent: str = typer.Argument(..., help="The agent."),
    version: int = typer.Argument(..., min=1, help="The version to copy into a new one."),
    note: str = typer.Option("", "--note", help="Why."),
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Copy a version into a new one (operators)."""
    path = [capability, agent, "versions", str(version), "clone"]
    created = _agent_write(ctx, (env, api_url, token, region), path, {"note": note})
    out.print(f"created {capability}/{agent} v{created['version']} ({created['source']})", highlight=False)


@agents_app.command("enable")
def agents_enable(
    ctx: typer.Context,
    capability: str = typer.Argument(..., help="The capability."),
    agent: str = typer.Argument(..., help="The agent."),
    disable: bool = typer.Option(False, "--disable", help="Disable it instead: no new mission starts."),
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Enable an agent (or --disable it: new missions of the capability are refused) (operators)."""
    action = "disable" if disable else "enable"
    state = _agent_write(ctx, (env, api_url, token, region), [capability, agent, action])
    out.print(escape(_agent_line(state)), highlight=False)


@agents_app.command("diff")
def agents_diff(
    ctx: typer.Context,
    capability: str = typer.Argument(..., help="The capability."),
    agent: str = typer.Argument(..., help="The agent."),
    older: int = typer.Argument(..., min=1, help="One version."),
    newer: int = typer.Argument(..., min=1, help="The other."),
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """What changed between two versions, field by field."""
    with _one_line():
        found = _api(ctx, env, api_url, token, region).call(
            "GET", _path("agents", capability, agent, "diff"), query={"from": older, "to": newer}
        )
    if not found["changes"]:
        out.print(f"v{older} and v{newer} are the same", highlight=False)
    for name, change in found["changes"].items():
        out.print(escape(f"{name}: {change['from']!r} -> {change['to']!r}"), highlight=False, soft_wrap=True)


@agents_app.command("audit")
def agents_audit(
    ctx: typer.Context,
    capability: str = typer.Argument(..., help="The capability."),
    agent: str = typer.Argument(..., help="The agent."),
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Who changed the agent, when, and what (newest first)."""
    with _one_line():
        found = _api(ctx, env, api_url, token, region).call("GET", _path("agents", capability, agent, "audit"))
    for entry in found["entries"]:
        detail = json.dumps(entry["detail"], sort_keys=True) if entry["detail"] else ""
        out.print(
            escape(f"{entry['at'][:19]}  {entry['actor']}  {entry['action']}  {detail}".rstrip()),
            highlight=False,
            soft_wrap=True,
        )


@app.command("usage")
def usage(
    ctx: typer.Context,
    mission_id: str = typer.Argument(..., help="The mission's id."),
    as_json: JsonOption = False,
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Every model call of a mission: stage, agent version, provider, model, tokens, cost, latency, outcome."""
    with _one_line():
        found = _api(ctx, env, api_url, token, region).call("GET", _path("missions", mission_id, "usage"))
    if as_json:
        out.print_json(data=found)
        return
    for call in found["calls"]:
        line = (
            f"{call['stage']:<12} v{call['version'] or 1}  {call['provider']}/{call['model']}  "
            f"{call['tokens_in']}+{call['tokens_out']} tokens  ${call['cost_usd']:.6f}  {call['latency_ms']:.0f} ms  "
            f"{call['outcome']}"
        )
        out.print(escape(line), highlight=False)
    total = found["total"]
    out.print(f"{total['calls']:.0f} calls, ${total['cost_usd']:.6f}", highlight=False)


# -- missions on an API ----------------------------------------------------------------------------


def _run_remote(
    api: ApiClient,
    sleep: Callable[[float], None],
    capability: str,
    goal: str,
    context: dict[str, Any],
    max_cost_usd: float | None,
    answers: list[str],
    timeout: float,
    as_json: bool,
) -> NoReturn:
    """POST /missions, follow its events, ask its questions, print its result (as `run` does locally)."""
    import uuid

    body: dict[str, Any] = {"capability": capability, "goal": goal, "context": context}
    if max_cost_usd is not None:
        body["max_cost_usd"] = max_cost_usd
    started = time.perf_counter()
    with _one_line():  # the key makes a retried start (503 with Retry-After) start one mission, not two
        created = api.call("POST", "/missions", body, ok=(202,), headers={"Idempotency-Key": str(uuid.uuid4())})
    mission_id = created["mission_id"]
    if not as_json:
        queued = " · queued behind your running missions" if created.get("status") == "queued" else ""
        out.print(f"[bold]mission[/] {mission_id} · [cyan]{capability}[/] · {api.base_url}{queued}", highlight=False)
    try:
        with _one_line():
            mission, stages, errors = _follow_remote(api, sleep, mission_id, answers, timeout, quiet=as_json)
    except KeyboardInterrupt:
        err.print(f"stopped following; mission {mission_id} goes on: missions status {mission_id}", highlight=False)
        raise typer.Exit(130) from None
    result = mission.get("result") or {}
    summary = {
        "mission_id": mission_id,
        "capability": mission.get("capability", capability),
        "status": mission["status"],
        "terminal_reason": mission.get("terminal_reason") or result.get("terminal_reason"),
        "answer": result.get("answer"),
        "citations": result.get("citations") or [],
        "counters": mission.get("counters") or {},
        "cost_usd": mission.get("cost_usd", 0.0),
        "stages": stages,
        "errors": errors,
        "api_url": api.base_url,
        "wall_seconds": round(time.perf_counter() - started, 3),
    }
    if as_json:
        sys.stdout.write(json.dumps(summary, indent=2, default=str) + "\n")
    else:
        _print_summary(summary)
    reason = summary["terminal_reason"] or ""
    ok = summary["status"] == "completed" and (reason == "completed" or reason.startswith(BOUND_REASONS))
    raise typer.Exit(0 if ok else 1)


def _follow_remote(
    api: ApiClient,
    sleep: Callable[[float], None],
    mission_id: str,
    answers: list[str],
    timeout: float,
    quiet: bool,
) -> tuple[dict[str, Any], list[str], list[dict[str, Any]]]:
    """Read events and the mission until it ends, answering each question once: (the mission as it
    ended, the stages that ran, the errors they reported)."""
    cursor: str | None = None
    stages: list[str] = []
    errors: list[dict[str, Any]] = []
    answered: set[str] = set()
    deadline = time.monotonic() + timeout

    def read_events() -> None:
        nonlocal cursor
        while True:
            page = api.call("GET", _path("missions", mission_id, "events"), query={"after": cursor, "limit": 500})
            for raw in page["events"]:
                try:
                    event = Event.model_validate(raw)
                except ValueError:  # a kind this CLI does not know yet
                    continue
                if event.type is EventType.AGENT_STARTED and event.stage:
                    stages.append(event.stage)
                if event.type is EventType.FLOW_ERROR:
                    p = event.payload
                    errors.append(
                        {"stage": event.stage or "", "kind": str(p.get("error")), "message": str(p.get("message"))}
                    )
                if not quiet:
                    _render(event)
            cursor = page.get("cursor") or cursor
            if len(page["events"]) < 500:
                return

    while True:
        read_events()
        mission: dict[str, Any] = api.call("GET", _path("missions", mission_id))
        if mission["status"] in TERMINAL:
            read_events()  # what the last stage wrote as it ended
            return mission, stages, errors
        pending = mission.get("pending_interrupt")
        if pending and pending["interrupt_id"] not in answered:
            if not answers and quiet and not sys.stdin.isatty():
                fail(
                    f"mission {mission_id} asks: {pending['question']!r}; it waits for "
                    f"missions answer {mission_id} {pending['interrupt_id']} '...' (or pass --answer)"
                )
            response = _ask(pending["kind"], pending["question"], pending.get("options") or [], answers, quiet)
            api.call(
                "POST",
                _path("missions", mission_id, "interrupts", pending["interrupt_id"]),
                response.model_dump(exclude_none=True),
            )
            answered.add(pending["interrupt_id"])
            continue
        if time.monotonic() > deadline:
            fail(f"mission {mission_id} did not finish within {timeout:.0f}s; it goes on: missions status", code=1)
        sleep(POLL_SECONDS)


@app.command("status")
def status(
    ctx: typer.Context,
    mission_id: str = typer.Argument(..., help="The mission's id."),
    as_json: JsonOption = False,
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """A mission's status, stage, question waiting for you, place in the queue, result and cost."""
    with _one_line():
        mission = _api(ctx, env, api_url, token, region).call("GET", _path("missions", mission_id))
    if as_json:
        out.print_json(data=mission)
        return
    lifecycle = f" ({mission['lifecycle']})" if mission.get("lifecycle") not in (None, mission["status"]) else ""
    lines = [
        f"{mission['mission_id']} · {mission['capability']} · {mission['status']}{lifecycle}, "
        f"stage {mission.get('stage') or '-'}",
        f"goal: {mission['goal']}",
    ]
    pending = mission.get("pending_interrupt")
    if pending:
        options = f" [{'/'.join(pending['options'])}]" if pending.get("options") else ""
        lines.append(f"asks: {pending['question']}{options}")
        lines.append(f"answer with: missions answer {mission['mission_id']} {pending['interrupt_id']} '...'")
    if mission.get("queue"):
        lines.append(f"queue: position {mission['queue'].get('position')}: {mission['queue'].get('reason')}")
    result = mission.get("result") or {}
    if result.get("answer"):
        lines.append(f"answer: {result['answer']}")
    if mission.get("terminal_reason"):
        lines.append(f"terminal reason: {mission['terminal_reason']}")
    counters = mission.get("counters") or {}
    lines.append(f"cost: ${mission.get('cost_usd', 0):.6f} · {counters.get('llm_calls', 0)} LLM calls")
    for line in lines:
        out.print(escape(line), highlight=False, soft_wrap=True)


@app.command("list")
def list_missions(
    ctx: typer.Context,
    status: str | None = typer.Option(None, "--status", help="Only missions in this status (e.g. interrupted)."),
    capability: str | None = typer.Option(None, "--capability", help="Only missions of this capability."),
    limit: int = typer.Option(20, "--limit", min=1, max=100, help="At most this many, newest first."),
    cursor: str | None = typer.Option(None, "--cursor", help="Where the previous page ended."),
    as_json: JsonOption = False,
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Your missions, newest first."""
    query = {"status": status, "capability": capability, "limit": limit, "cursor": cursor}
    with _one_line():
        page = _api(ctx, env, api_url, token, region).call("GET", "/missions", query=query)
    if as_json:
        out.print_json(data=page)
        return
    if not page["missions"]:
        out.print("no missions")
    rows = [
        [m["mission_id"], m["capability"], m["status"], m.get("stage") or "-", m["created_at"][:16].replace("T", " ")]
        + [m["goal"] if len(m["goal"]) <= 60 else m["goal"][:59] + "…"]
        for m in page["missions"]
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(5)] if rows else []
    for row in rows:  # one line per mission, whole ids, whatever the terminal's width: for reading and for grep
        line = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[5]
        out.print(escape(line), highlight=False, soft_wrap=True)
    if page.get("cursor"):
        out.print(f"[dim]more: missions list --cursor {page['cursor']}[/]", highlight=False)


@app.command("evaluate")
def evaluate_missions(
    ctx: typer.Context,
    last: int = typer.Option(20, "--last", min=1, max=100, help="Score your newest N missions that ended."),
    as_json: JsonOption = False,
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Score your newest missions: response latency, tool-use safety, delegation depth, tool calls."""
    ended = ("completed", "failed", "cancelled")
    with _one_line():
        api = _api(ctx, env, api_url, token, region)
        missions = [m for m in api.call("GET", "/missions", query={"limit": 100})["missions"] if m["status"] in ended]
        scored = [api.call("GET", f"/missions/{m['mission_id']}/evaluation") for m in missions[:last]]
    if as_json:
        out.print_json(data={"evaluations": scored})
        return
    if not scored:
        out.print("no missions have ended yet")
        return
    for evaluation in scored:
        scores = {s["name"]: s for s in evaluation["scores"]}
        flags = [name for name, score in scores.items() if not score["passed"]]
        line = (
            f"{evaluation['mission_id']}  {evaluation['capability']:<14} "
            f"latency {scores['response_latency']['value']:>6.1f} s  depth {scores['delegation_depth']['value']:.0f}  "
            f"tools {scores['tool_call_count']['value']:.0f}  "
            + ("ok" if not flags else "FLAGGED: " + ", ".join(flags))
        )
        out.print(escape(line), highlight=False, soft_wrap=True)
        for violation in evaluation["violations"]:
            out.print(escape(f"    safety: {violation}"), highlight=False, soft_wrap=True)
    violations = sum(len(e["violations"]) for e in scored)
    passed = sum(1 for e in scored if all(s["passed"] for s in e["scores"]))
    out.print(f"{passed}/{len(scored)} passed, {violations} safety violation(s)", highlight=False)
    if violations:
        raise typer.Exit(1)


@app.command("cancel")
def cancel(
    ctx: typer.Context,
    mission_id: str = typer.Argument(..., help="The mission's id."),
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Cancel a mission that is queued, running, waiting for you or paused."""
    with _one_line():
        _api(ctx, env, api_url, token, region).call("POST", _path("missions", mission_id, "cancel"))
    out.print(f"cancelled {mission_id}")


@app.command("pause")
def pause(
    ctx: typer.Context,
    mission_id: str = typer.Argument(..., help="The mission's id."),
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Pause a running mission: its stage in flight ends, then it waits (holding none of your running slots)."""
    with _one_line():
        _api(ctx, env, api_url, token, region).call("POST", _path("missions", mission_id, "pause"), ok=(202,))
    out.print(f"pausing {mission_id} (paused once its stage in flight ends)")


@app.command("resume")
def resume(
    ctx: typer.Context,
    mission_id: str = typer.Argument(..., help="The mission's id."),
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Resume a paused mission from where it stopped, with the notes you sent meanwhile."""
    with _one_line():
        body = _api(ctx, env, api_url, token, region).call("POST", _path("missions", mission_id, "resume"))
    how = "queued for one of your running slots" if body.get("status") == "queued" else "running"
    out.print(f"resumed {mission_id} ({how})")


@app.command("note")
def note(
    ctx: typer.Context,
    mission_id: str = typer.Argument(..., help="The mission's id."),
    text: str = typer.Argument(..., help="What the mission should know, e.g. 'the budget is 500'."),
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Steer a mission that has not ended: its next stage receives the note."""
    with _one_line():
        body = _api(ctx, env, api_url, token, region).call(
            "POST", _path("missions", mission_id, "notes"), {"text": text}, ok=(202,)
        )
    out.print(f"noted {body.get('note_id')} for {mission_id}")


@app.command("answer")
def answer(
    ctx: typer.Context,
    mission_id: str = typer.Argument(..., help="The mission's id."),
    interrupt_id: str = typer.Argument(..., help="The question's id (missions status shows it)."),
    text: str | None = typer.Argument(
        None, help="The answer: y/n for a confirmation or review, an option or its number for a choice, else text."
    ),
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Answer the question a mission is waiting on (asked in the terminal when no answer is given)."""
    api = _api(ctx, env, api_url, token, region)
    with _one_line():
        mission = api.call("GET", _path("missions", mission_id))
        pending = mission.get("pending_interrupt") or {}
        given = [text] if text is not None else []
        if pending.get("interrupt_id") == interrupt_id:
            response = _ask(pending["kind"], pending["question"], pending.get("options") or [], given, quiet=False)
        elif text is None:
            fail(f"mission {mission_id} is not waiting on {interrupt_id} (it is {mission['status']})")
        else:  # the API says why not (404: no such question; 409: answered already)
            response = InterruptResponse(text=text)
        body = response.model_dump(exclude_none=True)
        done = api.call("POST", _path("missions", mission_id, "interrupts", interrupt_id), body)
    queued = " (queued: it resumes when one of your running slots frees)" if done.get("status") == "queued" else ""
    out.print(f"answered {interrupt_id}{queued}")


# -- chat: a conversation in the terminal, over the chat API (OpenAI's wire format) ------------------

STREAM_URL_HELP = (
    "Where the API streams (/v1, event streams): env MISSIONS_STREAM_URL, else what `missions login "
    "--stream-url` cached, the stack's StreamUrl output, or the API's URL (right for `missions dev`)."
)
StreamUrlOption = Annotated[str | None, typer.Option("--stream-url", help=STREAM_URL_HELP)]
CHAT_EXIT = ("/exit", "/quit")
CHAT_TIMEOUT = 900.0  # seconds without a byte before a reply is given up on (the server sends a heartbeat every 10 s)


@app.command("chat")
def chat(
    ctx: typer.Context,
    capability: str | None = typer.Argument(
        None, help="The capability to talk to (default: the runtime chooses one for each message)."
    ),
    context: list[str] = typer.Option(
        [],
        "--context",
        help="The missions' context: KEY=VALUE (repeatable) or a JSON object; sent with the first message, "
        "the conversation keeps it.",
    ),
    repo: str | None = typer.Option(
        None,
        "--repo",
        help="Repository to talk about by path (locally default: the current directory; on an API, a path under "
        "its roots).",
    ),
    repository: str | None = typer.Option(
        None, "--repository", help="On an API: a registered repository's id (missions repos)."
    ),
    conversation: str | None = typer.Option(None, "--conversation", help="Continue this conversation (its id)."),
    offline: bool = typer.Option(False, "--offline", help="Use the scripted model even if OPENAI_API_KEY is set."),
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    stream_url: StreamUrlOption = None,
    token: TokenOption = None,
    region: RegionOption = None,
) -> None:
    """Talk with missions in the terminal: each message is a turn of one conversation, its progress shown
    live, its answer rendered; a mission's question is answered by the next message. /exit or Ctrl-D ends.
    On the embedded emulation, or on an API with --env, --api-url or --stream-url (or MISSIONS_API_URL,
    MISSIONS_STREAM_URL). Lines are read from stdin when it is not a terminal."""
    from missions.core.chat import AUTO_MODEL

    model = capability or AUTO_MODEL
    chat_context = _chat_context(context)
    given_api = (env, api_url, stream_url, os.environ.get("MISSIONS_API_URL"), os.environ.get("MISSIONS_STREAM_URL"))
    if any(given_api):
        if offline:
            fail("--offline: only on the emulation (the API runs its own model)")
        chat_context.update({k: v for k, v in (("repo", repo), ("repository", repository)) if v is not None})
        wiring = _wiring(ctx)
        endpoints, bearer, hint = _signed_in(wiring, env, api_url, token, region)
        base = _stream_base(wiring, endpoints, stream_url)
        session = ChatSession(base, bearer, model, chat_context, conversation, hint=hint)
        raise typer.Exit(session.run(base))
    if repository is not None:
        fail("--repository names a repository registered on an API: add --api-url or --env")
    if capability is not None:
        _capability(capability)
    root = os.path.abspath(os.path.expanduser(repo)) if repo is not None else os.getcwd()
    if repo is not None:
        chat_context["repo"] = root
    from missions.local.devserver import DevServer
    from missions.local.emulation import LocalCloud

    # one path: the dev server (the deployed API's handlers over the embedded emulation) on a free port
    llm = {} if offline else _llm_settings()
    names = [capability] if capability is not None else None
    with (
        LocalCloud(names, settings={**llm, "repo_roots": _repo_roots([root])}) as cloud,
        DevServer(cloud, port=0) as server,
    ):
        session = ChatSession(server.url, _dev_token(), model, chat_context, conversation, local=True)
        code = session.run(f"the embedded emulation ({_model_label(llm)})")
    raise typer.Exit(code)


def _chat_context(given: list[str]) -> dict[str, Any]:
    """--context values: each KEY=VALUE, or a JSON object (as `run` takes)."""
    context: dict[str, Any] = {}
    for item in given:
        if item.lstrip().startswith("{"):
            context.update(_parse_context(item))
            continue
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            fail(f"--context {item!r}: give KEY=VALUE or a JSON object")
        context[key.strip()] = value
    return context


class ChatSession:
    """One conversation over the chat API with OpenAI's SDK: the history kept and sent back each turn,
    the conversation named once known, the context sent with the first message."""

    def __init__(
        self,
        base_url: str,
        token: str,
        model: str,
        context: dict[str, Any],
        conversation: str | None,
        *,
        hint: str = "",
        local: bool = False,
    ):
        from openai import OpenAI

        # no retries: a retried POST would be a second turn (a second mission)
        self.client = OpenAI(base_url=f"{base_url}/v1", api_key=token, max_retries=0, timeout=CHAT_TIMEOUT)
        self.base_url, self.model, self.context, self.hint, self.local = base_url, model, dict(context), hint, local
        self.conversation = conversation
        self.messages: list[ChatCompletionMessageParam] = []
        self.context_sent = not context

    def run(self, where: str) -> int:
        """The loop: a prompt (or stdin's lines), a reply to each. Exit code 1 when a message got no reply."""
        with _one_line_openai(self.base_url, self.hint):
            offered = [m.id for m in self.client.models.list()]
        if self.model not in offered:
            fail(f"{where} has no capability {self.model!r}; it offers: {', '.join(offered)}")
        out.print(
            f"[bold]chat[/] · [cyan]{self.model}[/] · {escape(where)} · /exit or Ctrl-D ends",
            highlight=False,
            soft_wrap=True,
        )
        if self.conversation:
            out.print(f"[dim]conversation {escape(self.conversation)}[/]", highlight=False)
        interactive = sys.stdin.isatty()
        unanswered = 0
        for line in _chat_lines(interactive):
            text = line.strip()
            if not text:
                continue
            if text.lower() in CHAT_EXIT:
                break
            if not interactive:  # the transcript shows what was asked
                out.print(Text.assemble(("you› ", "bold"), text))
            unanswered += 0 if self.say(text) else 1
        return 1 if unanswered else 0

    def say(self, text: str) -> bool:
        """One turn: send the message with the history, follow the reply. False when it failed (said in one line)."""
        import httpx2
        import openai

        self.messages.append({"role": "user", "content": text})
        extra_body = {} if self.context_sent else {"context": self.context}
        headers = {"X-Conversation-Id": self.conversation} if self.conversation else {}
        mission_id = ""
        try:
            stream = self.client.chat.completions.create(
                model=self.model,
                messages=self.messages,
                stream=True,
                extra_body=extra_body,
                extra_headers=headers,
            )
            mission_id = stream.response.headers.get("x-mission-id") or ""
            self._named(stream.response.headers.get("x-conversation-id"))
            self.context_sent = True
            content, about = self._follow(stream)
        except KeyboardInterrupt:
            where = " while this chat runs" if self.local else ""
            mission = f"mission {mission_id} goes on{where}" if mission_id else "the mission goes on"
            err.print(f"stopped following the reply; {mission}: your next message gets its result first")
            return True
        except (openai.APIError, httpx2.HTTPError) as exc:
            self.messages.pop()  # refused or lost: the next message is sent without it
            err.print(f"[bold red]error:[/] {escape(_openai_error(exc, self.base_url, self.hint))}", soft_wrap=True)
            return False
        self.messages.append({"role": "assistant", "content": content})
        from rich.markdown import Markdown

        out.print(Markdown(content))
        if about.get("mission_status") == "asking":
            out.print("[dim]⏸ the mission waits for your answer: your next message[/]", highlight=False)
        return True

    def _named(self, conversation: str | None) -> None:
        if conversation and conversation != self.conversation:
            self.conversation = conversation
            out.print(
                f"[dim]conversation {escape(conversation)} (continue it later: missions chat "
                f"--conversation {escape(conversation)})[/]",
                highlight=False,
                soft_wrap=True,
            )

    def _follow(self, stream: Any) -> tuple[str, dict[str, Any]]:
        """Progress lines (dimmed) as they arrive, the answer's text, and what the last chunk said of the
        conversation and the mission."""
        from contextlib import nullcontext

        parts: list[str] = []
        about: dict[str, Any] = {}
        waiting = out.status("working…") if out.is_terminal else nullcontext()
        with stream, waiting:
            for piece in stream:
                extra = piece.model_extra or {}
                if "mission_status" in extra:
                    about = extra
                for choice in piece.choices:
                    reasoning = (choice.delta.model_extra or {}).get("reasoning_content")
                    for line in str(reasoning or "").splitlines():
                        if line.strip():
                            out.print(Text(line, style="dim"), highlight=False)
                    if choice.delta.content:
                        parts.append(choice.delta.content)
        return "".join(parts), about


def _chat_lines(interactive: bool) -> Iterator[str]:
    """What the user writes: a prompt per line in a terminal (Ctrl-D or Ctrl-C ends), else stdin's lines."""
    if not interactive:
        yield from sys.stdin
        return
    while True:
        try:
            yield out.input("[bold]you›[/] ")
        except (EOFError, KeyboardInterrupt):
            out.print()
            return


def _openai_error(exc: Exception, base_url: str, hint: str) -> str:
    """One line for a failed chat call: the API's status and message, as the other commands say it."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {"message": str(exc.body or "")}
        return error_line(exc.status_code, body, hint)
    if isinstance(exc, openai.APIConnectionError):
        return f"cannot reach {base_url}: {exc.__cause__ or exc}"
    return f"{type(exc).__name__}: {exc}"


@contextmanager
def _one_line_openai(base_url: str, hint: str) -> Iterator[None]:
    import httpx2
    import openai

    try:
        yield
    except (openai.APIError, httpx2.HTTPError) as exc:
        fail(_openai_error(exc, base_url, hint))


@app.command("login")
def login(
    ctx: typer.Context,
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    region: RegionOption = None,
    token_url: str | None = typer.Option(None, "--token-url", help="The token endpoint (default: the stack's)."),
    client_id: str | None = typer.Option(
        None, "--client-id", envvar="MISSIONS_CLIENT_ID", help="A machine client (default: the stack's)."
    ),
    client_secret: str | None = typer.Option(
        None, "--client-secret", envvar="MISSIONS_CLIENT_SECRET", help="Its secret.", show_default=False
    ),
    browser: bool = typer.Option(False, "--browser", help="A person: the hosted sign-in page, code flow with PKCE."),
    wait: float = typer.Option(300.0, "--wait", min=1.0, help="Seconds to wait for the sign-in page's answer."),
    print_token: bool = typer.Option(False, "--print-token", help="Print the access token (for curl)."),
    stream_url: str | None = typer.Option(
        None,
        "--stream-url",
        envvar="MISSIONS_STREAM_URL",
        help="Where the API streams (the chat, event streams), cached with the token (default: the stack's "
        "StreamUrl output, else the API's URL).",
    ),
) -> None:
    """Get a token for a deployed API and cache it (~/.config/missions/tokens.json, mode 0600):
    client credentials for a machine, or --browser for a person."""
    if env is None and api_url is None and not os.environ.get("MISSIONS_API_URL"):
        fail("login needs --env (a deployed stack) or --api-url with --token-url")
    wiring = _wiring(ctx)
    endpoints = _endpoints(wiring, env, api_url, region)
    if token_url:
        endpoints = replace(endpoints, token_url=token_url)
    if not endpoints.token_url:
        fail(f"{endpoints.base} names no token endpoint (IAM or your own identity provider?): pass --token-url")
    endpoint = TokenEndpoint(endpoints.token_url, wiring.transport, wiring.clock)
    with _one_line():
        if browser:
            token = _browser_login(wiring, endpoints, endpoint, wait)
        else:
            client_id = client_id or endpoints.machine_client_id
            if not client_id or not client_secret:
                fail(
                    "client credentials need --client-id and --client-secret (or MISSIONS_CLIENT_ID and "
                    "MISSIONS_CLIENT_SECRET); a person signs in with --browser"
                )
            token = endpoint.client_credentials(client_id, client_secret, scope=endpoints.scope)
        cache = wiring.cache()
        cache.put(endpoints.api_url, token)
        streams = stream_url or endpoints.stream_url
        if streams:  # `missions chat` streams there with this token
            cache.put_stream_url(endpoints.api_url, streams)
    if print_token:
        sys.stdout.write(token.access_token + "\n")
        return
    until = time.strftime("%H:%M", time.localtime(token.expires_at))
    out.print(
        f"signed in to {endpoints.base} as client {token.client_id} ({token.grant.replace('_', ' ')}); "
        f"the token is valid until {until}, cached in {cache.path}",
        highlight=False,
        soft_wrap=True,
    )


def _browser_login(wiring: Wiring, endpoints: Endpoints, endpoint: TokenEndpoint, wait: float) -> Token:
    """The hosted sign-in page in the browser; its answer arrives at the loopback callback (or is pasted)."""
    pkce = Pkce.new()
    page = sign_in(endpoints, pkce)
    try:
        listener: RedirectListener | None = RedirectListener(page.redirect_uri)
    except OSError as exc:  # the port is taken (by `missions dev`, say): the user pastes where it went
        err.print(f"[dim]cannot listen at {page.redirect_uri} ({exc}): paste the URL instead[/]", highlight=False)
        listener = None
    err.print(f"Sign in at:\n  {page.url}", highlight=False, soft_wrap=True)
    wiring.open_browser(page.url)
    if listener is not None:
        with listener:
            redirected = listener.wait(wait)
    else:
        redirected = typer.prompt("The URL your browser was sent to", err=True)
    code = code_from_redirect(redirected, pkce.state)
    return endpoint.authorization_code(page.client_id, code, page.redirect_uri, pkce.verifier)


@app.command("logout")
def logout(
    ctx: typer.Context,
    env: EnvOption = None,
    api_url: ApiUrlOption = None,
    region: RegionOption = None,
) -> None:
    """Forget the cached token of an API."""
    endpoints = _endpoints(_wiring(ctx), env, api_url, region)
    removed = _wiring(ctx).cache().remove(endpoints.api_url)
    message = f"signed out of {endpoints.base}" if removed else f"no token was cached for {endpoints.base}"
    out.print(message, highlight=False, soft_wrap=True)


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


def _operators_from_env() -> list[str]:
    text = os.environ.get("MISSIONS_OPERATORS", "").strip()
    if not text:
        return []
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        fail("MISSIONS_OPERATORS must be a JSON list of user names")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        fail("MISSIONS_OPERATORS must be a JSON list of user names")
    return value


def _llm_settings() -> dict[str, Any]:
    """The model provider the local emulation asks, from the environment: MISSIONS_LLM_PROVIDER names it
    (openai, anthropic, scripted); otherwise OPENAI_API_KEY or OPENAI_BASE_URL means OpenAI, and
    ANTHROPIC_API_KEY or ANTHROPIC_BASE_URL Anthropic; none: the offline scripted model."""
    named = os.environ.get("MISSIONS_LLM_PROVIDER", "").strip().lower()
    if named == "bedrock":
        fail("Bedrock runs in AWS only (the emulation is moto's): deploy, or use openai or anthropic locally")
    if named not in ("", "openai", "anthropic", "scripted"):
        fail(f"MISSIONS_LLM_PROVIDER must be openai, anthropic or scripted, not {named!r}")
    if named == "scripted":
        return {}
    openai_set = bool(os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"))
    anthropic_set = bool(os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_BASE_URL"))
    provider = named or ("openai" if openai_set else "anthropic" if anthropic_set else "")
    if not provider:
        return {}
    prefix = provider.upper()  # OPENAI_* / ANTHROPIC_*: each SDK's own variables
    settings: dict[str, Any] = {
        "llm_provider": provider,
        f"{provider}_api_key": os.environ.get(f"{prefix}_API_KEY"),
        f"{provider}_base_url": os.environ.get(f"{prefix}_BASE_URL"),
    }
    if os.environ.get(f"MISSIONS_{prefix}_DEFAULT_MODEL"):
        settings[f"{provider}_default_model"] = os.environ[f"MISSIONS_{prefix}_DEFAULT_MODEL"]
    if os.environ.get(f"MISSIONS_{prefix}_MODELS"):
        try:
            settings[f"{provider}_models"] = json.loads(os.environ[f"MISSIONS_{prefix}_MODELS"])
        except json.JSONDecodeError:
            fail(f"MISSIONS_{prefix}_MODELS must be a JSON object of role -> model")
    return settings


def _model_label(llm: dict[str, Any]) -> str:
    """Which model the emulation asks, as `run` and `chat` announce it."""
    provider = llm.get("llm_provider")
    if not provider:
        return "the offline scripted model"
    default = {"openai": "an OpenAI-compatible model", "anthropic": "claude-haiku-4-5"}[provider]
    return str(llm.get(f"{provider}_default_model", default))


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
                response = _ask(record.kind, record.question, record.options, answers, quiet)
                cloud.answer(mission_id, record.interrupt_id, response)
                answered.add(record.interrupt_id)
        if time.monotonic() > deadline:
            fail(f"mission {mission_id} did not finish within {timeout:.0f}s", code=1)
        time.sleep(0.05)


def _ask(kind_name: str, question: str, options: list[str], answers: list[str], quiet: bool) -> InterruptResponse:
    try:
        kind = InterruptKind(kind_name)
    except ValueError:  # a kind this CLI does not know: its answer is text
        kind = InterruptKind.CLARIFICATION
    if answers:
        text = answers.pop(0)
    elif not sys.stdin.isatty() and quiet:
        fail(f"the mission asks: {question!r}; pass --answer to answer it non-interactively")
    else:
        shown = f" [{'/'.join(options)}]" if options else ""
        hint = " [y/n]" if kind in (InterruptKind.CONFIRMATION, InterruptKind.AGENT_REVIEW) else shown
        try:
            text = typer.prompt(f"? {question}{hint}", err=True)
        except (typer.Abort, EOFError):
            fail(f"the mission asks: {question!r}; no answer was given (use --answer)")
    return _response(kind, text, options)


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


def _summary(outcome: Any, record: Any, elapsed: float, stages: list[str]) -> dict[str, Any]:
    """What `missions run` reports; `stages`: the stages that ran, in order (the mission's history)."""
    envelope = outcome.envelope
    final = envelope.output(envelope.current_stage) if envelope and envelope.current_stage else {}
    counters = envelope.counters.model_dump() if envelope else record.counters
    return {
        "mission_id": outcome.mission_id,
        "status": outcome.status,
        "mission_status": record.status,
        "terminal_reason": envelope.terminal_reason if envelope else record.terminal_reason,
        "answer": final.get("answer"),
        "citations": final.get("citations", []),
        "counters": counters,
        "stages": stages,
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
    if summary.get("error"):
        out.print(
            f"[red]execution {summary['status']}[/]: {escape(str(summary['error']))} "
            f"{escape(str(summary.get('cause') or ''))}",
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
