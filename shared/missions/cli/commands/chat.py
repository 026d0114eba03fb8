"""`missions chat`: a conversation in the terminal, over the chat API (OpenAI's wire format), on an API
or on the embedded emulation behind a dev server of its own."""

from __future__ import annotations

import os
from typing import Any

import typer

from .._chat_session import ChatSession
from .._console import fail
from .._inputs import capability as load_capability
from .._inputs import llm_settings, model_label, parse_context, repo_roots
from .._target import Target, targeted
from .._tokens import dev_token

app = typer.Typer()


@app.command("chat")
@targeted(stream=True)
def chat(
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
    *,
    target: Target,
) -> None:
    """Talk with missions in the terminal: each message is a turn of one conversation, its progress shown
    live, its answer rendered; a mission's question is answered by the next message. /exit or Ctrl-D ends.
    On the embedded emulation, or on an API with --env, --api-url or --stream-url (or MISSIONS_API_URL,
    MISSIONS_STREAM_URL). Lines are read from stdin when it is not a terminal."""
    from missions.core.chat import AUTO_MODEL

    model = capability or AUTO_MODEL
    chat_context = _chat_context(context)
    given_api = (
        target.env,
        target.api_url,
        target.stream_url,
        os.environ.get("MISSIONS_API_URL"),
        os.environ.get("MISSIONS_STREAM_URL"),
    )
    if any(given_api):
        if offline:
            fail("--offline: only on the emulation (the API runs its own model)")
        chat_context.update({k: v for k, v in (("repo", repo), ("repository", repository)) if v is not None})
        endpoints, bearer, hint = target.signed_in()
        base = target.stream_base(endpoints)
        session = ChatSession(base, bearer, model, chat_context, conversation, hint=hint)
        raise typer.Exit(session.run(base))
    if repository is not None:
        fail("--repository names a repository registered on an API: add --api-url or --env")
    if capability is not None:
        load_capability(capability)
    root = os.path.abspath(os.path.expanduser(repo)) if repo is not None else os.getcwd()
    if repo is not None:
        chat_context["repo"] = root
    from missions.local.devserver import DevServer
    from missions.local.emulation import LocalCloud

    # one path: the dev server (the deployed API's handlers over the embedded emulation) on a free port
    llm = {} if offline else llm_settings()
    names = [capability] if capability is not None else None
    with (
        LocalCloud(names, settings={**llm, "repo_roots": repo_roots([root])}) as cloud,
        DevServer(cloud, port=0) as server,
    ):
        session = ChatSession(server.url, dev_token(), model, chat_context, conversation, local=True)
        code = session.run(f"the embedded emulation ({model_label(llm)})")
    raise typer.Exit(code)


def _chat_context(given: list[str]) -> dict[str, Any]:
    """--context values: each KEY=VALUE, or a JSON object (as `run` takes)."""
    context: dict[str, Any] = {}
    for item in given:
        if item.lstrip().startswith("{"):
            context.update(parse_context(item))
            continue
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            fail(f"--context {item!r}: give KEY=VALUE or a JSON object")
        context[key.strip()] = value
    return context
