"""Credentials out of error text: the one function every stored or returned error passes through.

An error is text the runtime did not write: an OpenAI-compatible server's refusal that quotes the
key it was sent, a git URL with a password, a Step Functions Cause carrying either. Such text is
stored (a mission's errors, events, terminal reason, result; a repository's reason) and shown over
the API, so each place that stores or returns an error calls `redact` on it first:

* `Envelope.record_error`, the runner's `_absorb_failure` (the Cause a Catch hands back),
  `Event` payloads' error fields, `Lifecycle` (terminal reasons), a repository's import reason;
* the API's one error shape (`missions.app.resolver.error_body`);
* the OpenAI provider's own `LLMError` messages, so the key leaves no trace in logs and execution
  histories either.

Two kinds of evidence are removed:

1. secret *values* the runtime knows (`remember_secret`): the OpenAI key, whoever reads it
   (settings or Secrets Manager), and every webhook source's secret. Removed wherever they
   appear, whatever surrounds them: this is what holds when a server echoes the key verbatim.
2. secret *shapes*: ``Bearer <token>``, ``Authorization: <credential>``, OpenAI-style ``sk-...``
   keys, AWS access key ids (``AKIA``/``ASIA``/``ABIA``/``ACCA`` + 16), ``whsec_`` secrets,
   ``user:password@`` in URLs, and the value of a ``password``/``token``/``api_key``/``secret``
   (and the like) assignment in a query string, JSON or a repr.

Shapes are matched at word boundaries, to leave ordinary words (``task-list``, ``max_tokens``)
alone; a known value is removed even inside a word. Pure and import-light: the core holds it, so
the envelope and events can use it without reaching for a service.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable

REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 8  # shorter "secrets" would be ordinary words; real keys are far longer
_MAX_PASSES = 3


def _assignment(match: re.Match[str]) -> str:
    if match.group("dq") is not None:
        value = f'"{REDACTED}"'
    elif match.group("sq") is not None:
        value = f"'{REDACTED}'"
    else:
        value = REDACTED
    return f"{match.group('name')}{match.group('sep')}{value}"


_SHAPES: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = (
    # user:password@ in any URL
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*):[^/\s@]+@"), rf"\1:{REDACTED}@"),
    # Authorization headers (whatever the scheme), then bearer tokens anywhere
    (
        re.compile(r"""(?i)\b((?:proxy-)?authorization["']?\s*[:=]\s*["']?)(?:[A-Za-z]+\s+)?[^\s"',;]+"""),
        rf"\1{REDACTED}",
    ),
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9\-._~+/]+=*"), rf"\1 {REDACTED}"),
    # OpenAI (sk-..., sk-proj-..., also when partly masked with *), Anthropic-style sk-ant-...
    (re.compile(r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_*-]{8,}"), REDACTED),
    # AWS access key ids: long-term (AKIA), temporary (ASIA), and the other access-key prefixes
    (re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])"), REDACTED),
    # Standard Webhooks secrets
    (re.compile(r"whsec_[A-Za-z0-9+/=_-]+"), REDACTED),
    # name = value, name: value, "name": "value", ?name=value&... for credential-like names
    (
        re.compile(
            r"""(?ix)
            (?P<name>(?<![A-Za-z0-9])[\w.-]*?
                (?:password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key
                |secret[_-]?key|credentials?|auth[_-]?token|session[_-]?id))
            (?P<sep>["']?\s*[:=]\s*)
            (?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<bare>[^\s"'&,;()<>{}\[\]]+))
            """
        ),
        _assignment,
    ),
)


class _KnownSecrets:
    """Secret values this process has read; each is removed from every error it later stores."""

    def __init__(self) -> None:
        self._values: tuple[str, ...] = ()
        self._lock = threading.Lock()

    def add(self, value: str | None) -> None:
        if value is None or not _usable(value):
            return
        with self._lock:
            if value not in self._values:  # longest first: a secret that contains another goes whole
                self._values = tuple(sorted({*self._values, value}, key=len, reverse=True))

    def discard(self, value: str) -> None:
        with self._lock:
            self._values = tuple(v for v in self._values if v != value)

    @property
    def values(self) -> tuple[str, ...]:
        return self._values


def _usable(value: str) -> bool:
    """Long enough to be a secret, and not something the marker itself would bring back."""
    return len(value) >= MIN_SECRET_CHARS and REDACTED not in value and value not in REDACTED


_KNOWN = _KnownSecrets()


def remember_secret(value: str | None) -> None:
    """Make `redact` remove this value wherever it appears (no-op for None or short values)."""
    _KNOWN.add(value)


def forget_secret(value: str) -> None:
    """Undo `remember_secret` (tests)."""
    _KNOWN.discard(value)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` without credentials: the known secret values and `secrets`, then the secret shapes.

    Passes repeat until nothing changes, so a removal cannot leave a credential stitched together
    from what was around it; if a known value still appears after that, nothing of the text is kept.
    """
    if not text:
        return text
    extra = [s for s in secrets if _usable(s)]
    values = sorted({*_KNOWN.values, *extra}, key=len, reverse=True) if extra else _KNOWN.values
    for _ in range(_MAX_PASSES):
        before = text
        for value in values:
            if value in text:
                text = text.replace(value, REDACTED)
        for pattern, replacement in _SHAPES:
            text = pattern.sub(replacement, text)
        if text == before:
            break
    if any(value in text for value in values):
        return REDACTED
    return text


__all__ = ["MIN_SECRET_CHARS", "REDACTED", "forget_secret", "redact", "remember_secret"]
