"""The chat's read-eval-print loop: one conversation over the chat API with OpenAI's SDK."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.text import Text

from missions.client import error_line

from ._console import err, fail, out

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam

CHAT_EXIT = ("/exit", "/quit")
CHAT_TIMEOUT = 900.0  # seconds without a byte before a reply is given up on (the server sends a heartbeat every 10 s)


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
