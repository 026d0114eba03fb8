"""What the MCP endpoint offers: missions as tools and resources, on the official SDK's low-level server.

Tools list capabilities, start a mission, read one, list and answer its questions, and cancel it; each is
one API operation called as the MCP request's user (missions.app.mcp.caller), so it answers what the API
answers, errors included (a tool error carries the API's status and message, for the model to read).

A call that starts, answers or reads a mission may wait for it (`wait_seconds`, at most MAX_WAIT): until
it ends, asks its user something, pauses, or the wait is over, sending a progress notification at each
stage when the client asked for them (a `progressToken`). The bound keeps a call inside the HTTP API's
30-second integration limit; a mission that outlives it is returned as it is, with how to follow it.

Resources are each mission's result, events and documents (`mission://{id}/result`, `/events`,
`/artifacts`, `/artifacts/{path}`); the caller's recent missions are listed.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Literal
from urllib.parse import quote, unquote

import anyio
import anyio.to_thread
from mcp import types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl, BaseModel, ConfigDict, Field, JsonValue, ValidationError

from missions.app.mcp.caller import IDEMPOTENCY_HEADER, ApiRefused, Caller

SERVER_NAME = "missions"
MAX_WAIT = 25.0  # seconds a call may wait for its mission: under the HTTP API's 30 s integration limit
DEFAULT_WAIT = 20.0
POLL_SECONDS = 0.5
RECENT_RESOURCES = 20  # missions listed as resources
SETTLED = {"completed", "failed", "cancelled", "archived", "paused"}  # nothing happens without the user
SCHEME = "mission"
RESOURCE_NOT_FOUND = -32002  # the MCP specification's code for a resource that does not exist
INSTRUCTIONS = (
    "Long-running LLM missions. list_capabilities names the mission types; start_mission starts one and "
    "waits a little for it; a mission that asks a question waits (days if need be) for answer_question; "
    "get_mission follows one. Results, events and documents are resources: mission://{mission_id}/result."
)


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Waits(_Arguments):
    wait_seconds: float = Field(
        DEFAULT_WAIT,
        ge=0,
        le=MAX_WAIT,
        description="how long to wait for the mission to end or ask something (progress is reported meanwhile); "
        "0 returns at once",
    )


class ListCapabilities(_Arguments):
    pass


class StartMission(_Waits):
    goal: str = Field(min_length=1, max_length=10_000, description="what the mission is to achieve")
    capability: str | None = Field(
        None,
        min_length=1,
        max_length=64,
        description="a mission type from list_capabilities; omit (or 'auto') to have it chosen by the goal",
    )
    context: dict[str, JsonValue] = Field(default_factory=dict, description="inputs the capability reads")
    max_cost_usd: float | None = Field(None, gt=0, le=10_000, description="this mission's dollar bound")
    priority: Literal["urgent", "high", "medium", "low"] = "medium"
    conversation_id: str | None = Field(None, pattern=r"^[A-Za-z0-9_.:-]{1,128}$")
    idempotency_key: str | None = Field(
        None, min_length=1, max_length=255, description="the same key within 24 hours returns the first start"
    )


class GetMission(_Waits):
    mission_id: str = Field(min_length=1, max_length=128)
    wait_seconds: float = Field(0, ge=0, le=MAX_WAIT, description="wait for it to end or ask something first")


class ListMissions(_Arguments):
    status: str | None = Field(None, max_length=32, description="only missions in this status")
    limit: int = Field(20, ge=1, le=100)


class ListQuestions(_Arguments):
    mission_id: str | None = Field(None, min_length=1, max_length=128, description="only this mission's")


class AnswerQuestion(_Waits):
    mission_id: str = Field(min_length=1, max_length=128)
    interrupt_id: str = Field(min_length=1, max_length=128, description="from list_questions or get_mission")
    text: str | None = Field(None, max_length=20_000, description="a free answer (a clarification)")
    approved: bool | None = Field(None, description="yes or no, for a confirmation")
    decision: str | None = Field(None, max_length=200, description="one of the question's options")
    data: dict[str, JsonValue] | None = Field(None, description="a structured answer, as the question asks")


class CancelMission(_Arguments):
    mission_id: str = Field(min_length=1, max_length=128)


# name -> (arguments, what it does, whether it changes anything)
TOOLS: dict[str, tuple[type[_Arguments], str, bool]] = {
    "list_capabilities": (ListCapabilities, "The mission types installed, with what each needs.", False),
    "start_mission": (
        StartMission,
        "Start a mission and wait up to wait_seconds for it to end or ask a question; returns its state.",
        True,
    ),
    "get_mission": (GetMission, "A mission's status, result and waiting questions.", False),
    "list_missions": (ListMissions, "Your missions, newest first.", False),
    "list_questions": (ListQuestions, "Every question a mission of yours is waiting on.", False),
    "answer_question": (
        AnswerQuestion,
        "Answer a mission's question; it resumes. Waits up to wait_seconds for what follows.",
        True,
    ),
    "cancel_mission": (CancelMission, "Cancel a mission that has not ended.", True),
}


class ToolFailed(Exception):
    """A tool the API refused: the MCP result is an error whose text is this message."""


class _StatelessServer(Server[Any, Any]):
    """The SDK's server, whose initialization options (what `initialize` answers) are made once: a stateless
    session manager asks for them at every request, and they name the SDK's version, read from the installed
    package's metadata each time (about 1 ms)."""

    @functools.cached_property
    def _options(self) -> InitializationOptions:
        return super().create_initialization_options()

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        if notification_options is None and experimental_capabilities is None:
            return self._options
        return super().create_initialization_options(notification_options, experimental_capabilities)


def build_server() -> Server[Any, Any]:
    """The endpoint's server: stateless, built once per process; the caller of each request is in its
    ASGI scope (see missions.app.mcp.transport)."""
    server = _StatelessServer(SERVER_NAME, instructions=INSTRUCTIONS)

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [
            types.Tool(
                name=name,
                description=description,
                inputSchema=arguments.model_json_schema(),
                annotations=types.ToolAnnotations(
                    readOnlyHint=not changes, destructiveHint=name == "cancel_mission", openWorldHint=False
                ),
            )
            for name, (arguments, description, changes) in TOOLS.items()
        ]

    @server.call_tool(validate_input=False)  # validated by the tool's model: its errors name the field
    async def call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        entry = TOOLS.get(name)
        if entry is None:
            raise ToolFailed(f"no tool {name}: the tools are {', '.join(TOOLS)}")
        try:
            parsed = entry[0].model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
            raise ToolFailed(f"invalid arguments: {problems}") from None
        caller = _caller(server)
        progress = _progress(server)
        try:
            return await _HANDLERS[name](caller, parsed, progress)
        except ApiRefused as exc:
            raise ToolFailed(f"{exc.status}: {exc.message}") from exc

    @server.list_resources()
    async def list_resources() -> list[types.Resource]:
        caller = _caller(server)
        page = await _api(caller, "GET", "/missions", query={"limit": RECENT_RESOURCES})
        return [
            types.Resource(
                uri=AnyUrl(f"{SCHEME}://{m['mission_id']}/result"),
                name=f"{m['mission_id']} result",
                description=f"{m['capability']} ({m['status']}): {m['goal'][:200]}",
                mimeType="application/json",
            )
            for m in page["missions"]
        ]

    @server.list_resource_templates()
    async def list_templates() -> list[types.ResourceTemplate]:
        return [
            types.ResourceTemplate(
                uriTemplate=f"{SCHEME}://{{mission_id}}/{what}",
                name=f"mission {what}",
                description=description,
                mimeType="application/json",
            )
            for what, description in (
                ("result", "a mission's status and result"),
                ("events", "a mission's events, in order"),
                ("artifacts", "the documents a mission wrote"),
                ("artifacts/{path}", "one document's latest version"),
            )
        ]

    @server.read_resource()
    async def read_resource(uri: AnyUrl) -> Iterable[ReadResourceContents]:
        caller = _caller(server)
        try:
            content = await _read(caller, str(uri))
        except ApiRefused as exc:  # a mission not found (or not the caller's) is MCP's "resource not found"
            code = RESOURCE_NOT_FOUND if exc.status == 404 else types.INVALID_PARAMS
            raise McpError(types.ErrorData(code=code, message=f"{exc.status}: {exc.message}")) from exc
        except ToolFailed as exc:
            raise McpError(types.ErrorData(code=types.INVALID_PARAMS, message=str(exc))) from exc
        text = content if isinstance(content, str) else json.dumps(content, indent=2)
        return [ReadResourceContents(text, "text/plain" if isinstance(content, str) else "application/json")]

    return server


# -- each tool: one API operation (and, for some, a wait) ------------------------------------------------

Progress = Callable[[float, str], Awaitable[None]]


async def _list_capabilities(caller: Caller, _: BaseModel, progress: Progress) -> dict[str, Any]:
    return await _api(caller, "GET", "/capabilities")  # type: ignore[no-any-return]


async def _start(caller: Caller, args: BaseModel, progress: Progress) -> dict[str, Any]:
    assert isinstance(args, StartMission)
    body = args.model_dump(exclude={"wait_seconds", "idempotency_key"}, exclude_none=True)
    if body.get("capability") == "auto":
        body.pop("capability")
    headers = {IDEMPOTENCY_HEADER: args.idempotency_key} if args.idempotency_key else None
    started = await _api(caller, "POST", "/missions", body=body, headers=headers)
    return await _followed(caller, started["mission_id"], args.wait_seconds, progress)


async def _get(caller: Caller, args: BaseModel, progress: Progress) -> dict[str, Any]:
    assert isinstance(args, GetMission)
    return await _followed(caller, args.mission_id, args.wait_seconds, progress)


async def _list_missions(caller: Caller, args: BaseModel, progress: Progress) -> dict[str, Any]:
    assert isinstance(args, ListMissions)
    return await _api(caller, "GET", "/missions", query=args.model_dump(exclude_none=True))  # type: ignore[no-any-return]


async def _questions(caller: Caller, args: BaseModel, progress: Progress) -> dict[str, Any]:
    assert isinstance(args, ListQuestions)
    inbox = await _api(caller, "GET", "/inbox")
    items = [i for i in inbox.get("items", []) if args.mission_id in (None, i.get("mission_id"))]
    return {"questions": items}


async def _answer(caller: Caller, args: BaseModel, progress: Progress) -> dict[str, Any]:
    assert isinstance(args, AnswerQuestion)
    body = args.model_dump(include={"text", "approved", "decision", "data"}, exclude_none=True)
    path = f"/missions/{quote(args.mission_id, safe='')}/interrupts/{quote(args.interrupt_id, safe='')}"
    accepted = await _api(caller, "POST", path, body=body)
    followed = await _followed(caller, args.mission_id, args.wait_seconds, progress)
    return {"answer": accepted, **followed}


async def _cancel(caller: Caller, args: BaseModel, progress: Progress) -> dict[str, Any]:
    assert isinstance(args, CancelMission)
    return await _api(caller, "POST", f"/missions/{quote(args.mission_id, safe='')}/cancel")  # type: ignore[no-any-return]


_HANDLERS: dict[str, Callable[[Caller, BaseModel, Progress], Awaitable[dict[str, Any]]]] = {
    "list_capabilities": _list_capabilities,
    "start_mission": _start,
    "get_mission": _get,
    "list_missions": _list_missions,
    "list_questions": _questions,
    "answer_question": _answer,
    "cancel_mission": _cancel,
}


async def _followed(caller: Caller, mission_id: str, wait: float, progress: Progress) -> dict[str, Any]:
    """The mission once it ended, asked something or paused, or as it is when `wait` is over; each stage
    it reaches meanwhile is reported as progress."""
    path = f"/missions/{quote(mission_id, safe='')}"
    deadline = time.monotonic() + wait
    seen: tuple[Any, ...] | None = None
    while True:
        mission = await _api(caller, "GET", path)
        hops = int((mission.get("counters") or {}).get("agent_hops") or 0)
        now = (mission["status"], mission.get("running_stage"), hops)
        if now != seen:
            seen = now
            stage = mission.get("running_stage") or mission.get("stage")
            await progress(float(hops), f"{mission['status']}" + (f": {stage}" if stage else ""))
        if _settled(mission) or time.monotonic() >= deadline:
            return {**mission, "follow": _how_to_follow(mission)}
        await anyio.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))


def _settled(mission: dict[str, Any]) -> bool:
    """Whether nothing more happens to it without its user: ended, paused, or asking (once askable)."""
    return mission["status"] in SETTLED or bool(mission.get("pending_interrupts"))


def _how_to_follow(mission: dict[str, Any]) -> str:
    mission_id, status = mission["mission_id"], mission["status"]
    if mission.get("pending_interrupts"):
        ids = ", ".join(q["interrupt_id"] for q in mission["pending_interrupts"])
        return f"it waits for your answer: answer_question with mission_id {mission_id} and interrupt_id {ids}"
    if status in SETTLED:
        return f"it is {status}: its result is the resource {SCHEME}://{mission_id}/result"
    return f"it is {status}: call get_mission with mission_id {mission_id} (and wait_seconds) to follow it"


# -- resources ------------------------------------------------------------------------------------------


async def _read(caller: Caller, uri: str) -> Any:
    scheme, _, rest = uri.partition("://")
    mission_id, _, what = rest.partition("/")
    if scheme != SCHEME or not mission_id:
        raise ToolFailed(f"no resource {uri}: resources are {SCHEME}://{{mission_id}}/result|events|artifacts")
    base = f"/missions/{quote(unquote(mission_id), safe='')}"
    if what == "result":
        mission = await _api(caller, "GET", base)
        keys = ("mission_id", "capability", "goal", "status", "terminal_reason", "result", "cost_usd")
        return {key: mission.get(key) for key in keys}
    if what == "events":
        return await _all_events(caller, base)
    if what == "artifacts":
        return await _api(caller, "GET", f"{base}/artifacts")
    if what.startswith("artifacts/"):
        path = unquote(what.removeprefix("artifacts/"))
        artifact = await _api(caller, "GET", f"{base}/artifact", query={"path": path})
        content = artifact.get("content")
        return content if isinstance(content, str) else artifact
    raise ToolFailed(f"no resource {uri}: resources are {SCHEME}://{{mission_id}}/result|events|artifacts")


async def _all_events(caller: Caller, base: str, pages: int = 20) -> dict[str, Any]:
    events: list[Any] = []
    after = None
    for _ in range(pages):  # at most pages x 500 events in one read
        page = await _api(caller, "GET", f"{base}/events", query={"after": after, "limit": 500})
        events += page["events"]
        if not page["events"] or page.get("cursor") in (None, after):
            break
        after = page["cursor"]
    return {"events": events}


# -- plumbing -------------------------------------------------------------------------------------------


async def _api(caller: Caller, method: str, path: str, **kwargs: Any) -> Any:
    """The API call in a worker thread: the API's code blocks (DynamoDB, Step Functions)."""
    return await anyio.to_thread.run_sync(lambda: caller.call(method, path, **kwargs))


def _caller(server: Server[Any, Any]) -> Caller:
    request = server.request_context.request
    caller = request.scope.get(CALLER_KEY) if request is not None else None
    if not isinstance(caller, Caller):
        raise ToolFailed("no authenticated caller")  # the transport always sets one; never reached from a client
    return caller


def _progress(server: Server[Any, Any]) -> Progress:
    """Progress notifications for the current request, when its client asked for them."""
    context = server.request_context
    token = context.meta.progressToken if context.meta is not None else None

    async def report(progress: float, message: str) -> None:
        if token is not None:
            await context.session.send_progress_notification(
                token, progress, message=message, related_request_id=str(context.request_id)
            )

    return report


CALLER_KEY = "missions.caller"  # where the transport puts the request's Caller in the ASGI scope

__all__ = ["CALLER_KEY", "MAX_WAIT", "SCHEME", "SERVER_NAME", "TOOLS", "ToolFailed", "build_server"]
