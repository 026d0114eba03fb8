"""The stage's model work: the prompt a stage function's `think` sends, one call counted against the
mission's bounds and cost, and its answer streamed onto the mission's events while it is written."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel

from missions.core.capability.registry import Capability, StageContext, StageDefinitionError
from missions.core.cost.usage import Outcome
from missions.core.llm.limits import Abandoned
from missions.core.llm.provider import (
    InvalidOutput,
    LLMBudgetExhausted,
    LLMError,
    LLMRequest,
    LLMResult,
    TransientLLMError,
)
from missions.core.mission.envelope import Envelope
from missions.core.mission.events import Event, EventType
from missions.ports.events import EventStore
from missions.service.runner._agents import PinnedAgents
from missions.service.runner._base import Invocation, StageServices
from missions.service.runner._usage import UsageLedger

log = logging.getLogger(__name__)


class Clock(Protocol):
    def __call__(self) -> float: ...


@dataclass(eq=False)
class ModelCalls:
    _capability: Capability
    _services: StageServices
    _agents: PinnedAgents
    _usage: UsageLedger
    _invocation: Invocation

    def complete(
        self,
        ctx: StageContext,
        messages: list[dict[str, str]],
        output_model: type[BaseModel],
        facts: dict[str, Any] | None = None,
        repair: int = 0,
    ) -> BaseModel:
        """One model call for the stage, counted against the mission's bounds and cost. It carries an output
        limit (the agent's, else its role's in the capability, capped by the provider's ceiling), and every
        attempt the provider abandons is recorded and counted at its estimated cost, however the call ends."""
        envelope, agent = ctx.envelope, ctx.agent
        if envelope.counters.llm_calls >= envelope.bounds.max_llm_calls:
            raise LLMBudgetExhausted(f"stage '{agent.name}': max_llm_calls ({envelope.bounds.max_llm_calls}) reached")
        version = self._agents.version(envelope, agent.name)
        provider = self._services.llm(self._capability)
        pipeline = self._capability.pipeline
        request = LLMRequest(
            stage=agent.name,
            role=pipeline.role_of(agent),
            messages=messages,
            output_model=output_model,
            temperature=agent.temperature,
            max_tokens=bounded(provider, pipeline.output_limit(agent)),
            envelope=envelope,
            deadline=self._invocation.deadline,
            facts=facts or {},
            # the mission's model (its request's), else the version's; None: the environment's for the role
            model=envelope.model or (version.model if version is not None else None),
            fallback_model=version.fallback_model if version is not None else None,
        )
        output = ModelOutput(
            self._services.events, envelope.mission_id, agent.name, ctx.write_token, repair=repair or None
        )
        request.on_text, request.on_retry = output.write, output.restart

        def abandoned(attempt: Abandoned) -> None:  # as it happens: a call that fails later still counts it
            self._usage.abandoned(envelope, agent.name, provider, request, attempt)
            envelope.counters.cost_usd = round(envelope.counters.cost_usd + attempt.cost_usd, 8)

        request.on_abandoned = abandoned
        clock = self._services.clock
        t0 = clock()
        try:
            try:
                result = provider.complete(request)
            finally:
                output.close()
        except LLMError as exc:
            elapsed = (clock() - t0) * 1000
            self._invocation.timings.llm_ms += elapsed
            outcome: Outcome = "transient_error" if isinstance(exc, TransientLLMError) else "error"
            spent = exc.spent if isinstance(exc, InvalidOutput) else None  # answered, not validly: still paid
            self._usage.record(envelope, agent.name, provider, request, spent, elapsed, outcome, str(exc))
            if spent is not None:
                _count(envelope, spent)
            raise
        except BaseException:
            self._invocation.timings.llm_ms += (clock() - t0) * 1000
            raise
        elapsed = (clock() - t0) * 1000
        self._invocation.timings.llm_ms += elapsed
        self._usage.record(envelope, agent.name, provider, request, result, result.latency_ms or elapsed, "ok")
        _count(envelope, result)
        ctx.scratch["llm_model"] = result.model
        return result.output


def bounded(provider: Any, limit: int | None) -> int | None:
    """The limit the provider will send for `limit` (capped at, or when None its, ceiling), so the usage
    records show it; a provider without a ceiling (the offline one) takes it as it is."""
    output_limit = getattr(provider, "output_limit", None)
    return int(output_limit(limit)) if callable(output_limit) else limit


def _count(envelope: Envelope, result: LLMResult) -> None:
    """One answered call against the mission's bounds: its tokens and its cost."""
    counters = envelope.counters
    counters.llm_calls += 1
    counters.tokens_in += result.tokens_in
    counters.tokens_out += result.tokens_out
    counters.cost_usd = round(counters.cost_usd + result.cost_usd, 8)


class ModelOutput:
    """Puts a streaming model's answer on the mission's event stream while the stage runs (`llm.output`
    events), so a client following the stream sees it being written. Pieces are gathered for
    FLUSH_SECONDS before one batch is appended (each append is a read and a write of the events table),
    and what is left when the call ends goes last, marked `final`. When the provider asks again (a retry,
    the fallback model) or the stage asks again after an invalid answer (a repair), a batch marked `restart`
    says that the text before it is not the answer. A store
    that fails is logged: the answer still reaches the stage, only its live view is lost."""

    FLUSH_SECONDS = 0.5

    def __init__(
        self,
        events: EventStore,
        mission_id: str,
        agent: str,
        token: str,
        clock: Clock = time.monotonic,
        repair: int | None = None,
    ):
        self._events = events
        self._mission_id = mission_id
        self._agent = agent
        self._token = token  # the stage's "<stage>@<hop>": with a random part, every batch is new
        self._clock = clock
        self._pending: list[str] = []
        self._flushed_at = clock()
        self._parts = 0
        # a repair's answer replaces the invalid one streamed before it: its first batch says so
        self._repair = repair

    def write(self, piece: str) -> None:
        self._pending.append(piece)
        if self._clock() - self._flushed_at >= self.FLUSH_SECONDS:
            self._flush(final=False)

    def restart(self, attempt: int) -> None:
        """The provider asks again: what is pending goes unsent; a client that was shown earlier parts is
        told to drop them (nothing was shown: nothing to say)."""
        self._pending = []
        if self._parts:
            self._flush(final=False, restart=attempt)

    def close(self) -> None:
        if self._pending or self._parts:
            self._flush(final=True)

    def _flush(self, *, final: bool, restart: int | None = None) -> None:
        text, self._pending = "".join(self._pending), []
        self._flushed_at = self._clock()
        payload: dict[str, Any] = {"agent": self._agent, "part": self._parts, "text": text, "final": final}
        if restart is not None:
            payload["restart"] = restart  # the attempt that begins here: drop the text of the parts before
        elif self._repair is not None:
            payload["restart"] = 1
            payload["repair"] = self._repair  # the stage asks again after an invalid answer: drop it too
        self._repair = None
        self._parts += 1
        event = Event(type=EventType.LLM_OUTPUT, mission_id=self._mission_id, stage=self._agent, payload=payload)
        try:
            self._events.append(self._mission_id, f"{self._token}!llm-{uuid.uuid4().hex[:8]}", [event])
        except Exception:
            log.exception("model output of mission %s (stage %s) not streamed", self._mission_id, self._agent)


def messages(ctx: StageContext, rendered: Mapping[str, str]) -> list[dict[str, str]]:
    """A stage function's model call: its prompt, then the goal, the context and the facts it gave
    (each already rendered as JSON)."""
    if ctx.system_prompt is None:
        raise StageDefinitionError(f"stage '{ctx.agent.name}' thinks but has no prompt in capability.toml")
    context = json.dumps(ctx.envelope.context, default=str, sort_keys=True, ensure_ascii=False)[:4000]
    lines = [f"Goal: {ctx.goal}", f"Context: {context}"]
    lines += [f"{name.replace('_', ' ').capitalize()}: {text}" for name, text in rendered.items()]
    return [{"role": "system", "content": ctx.system_prompt}, {"role": "user", "content": "\n".join(lines)}]


def as_json(value: Any) -> str:
    """A fact as the model reads it: JSON, models dumped, text as written (not \\u-escaped)."""
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(
        value, ensure_ascii=False, default=lambda v: v.model_dump(mode="json") if isinstance(v, BaseModel) else str(v)
    )
