"""The record of every model call a stage makes (missions.core.cost.usage), kept in the usage store and on the
invocation for its metrics."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from missions.core.cost.usage import Outcome, UsageRecord
from missions.core.llm.limits import Abandoned
from missions.core.llm.provider import LLMProvider, LLMRequest, LLMResult
from missions.core.mission.envelope import Envelope
from missions.core.redaction import redact
from missions.service.runner._base import Invocation, StageServices

log = logging.getLogger(__name__)


@dataclass(eq=False)
class UsageLedger:
    _capability: str
    _services: StageServices
    _invocation: Invocation

    def record(
        self,
        envelope: Envelope,
        stage: str,
        provider: LLMProvider,
        request: LLMRequest,
        result: LLMResult | None,
        latency_ms: float,
        outcome: Outcome,
        error: str | None = None,
    ) -> None:
        """Keep one model call. A store that fails is logged, not raised: the call was made and paid for,
        and a retried stage would only make it again."""
        asked = request.model or model_for(provider, request.role)
        record = UsageRecord(
            mission_id=envelope.mission_id,
            user_id=envelope.user_id,
            capability=self._capability,
            stage=request.stage,
            agent=stage,
            version=envelope.agents.get(stage),
            provider=provider.name,
            model=result.model if result is not None else asked,
            tokens_in=result.tokens_in if result is not None else 0,
            tokens_out=result.tokens_out if result is not None else 0,
            cost_usd=result.cost_usd if result is not None else 0.0,
            latency_ms=round(max(0.0, latency_ms), 3),
            outcome=outcome,
            error=redact(error)[:500] if error else None,
            max_tokens=request.max_tokens,
        )
        self._keep(envelope, stage, record)

    def abandoned(
        self, envelope: Envelope, stage: str, provider: LLMProvider, request: LLMRequest, attempt: Abandoned
    ) -> None:
        """Keep an attempt the client gave up on, at its estimated cost (missions.core.llm.limits)."""
        record = UsageRecord(
            mission_id=envelope.mission_id,
            user_id=envelope.user_id,
            capability=self._capability,
            stage=request.stage,
            agent=stage,
            version=envelope.agents.get(stage),
            provider=provider.name,
            model=attempt.model,
            tokens_in=attempt.tokens_in,
            tokens_out=attempt.tokens_out,
            cost_usd=attempt.cost_usd,
            latency_ms=round(max(0.0, attempt.elapsed_ms), 3),
            outcome="abandoned",
            error=redact(attempt.reason)[:500],
            max_tokens=attempt.max_tokens,
            attempt=attempt.attempt,
            timeout_s=attempt.timeout_s,
        )
        self._keep(envelope, stage, record)

    def _keep(self, envelope: Envelope, stage: str, record: UsageRecord) -> None:
        self._invocation.usage.append(record)
        store = self._services.usage
        if store is None:
            return
        budgets = self._services.budgets
        try:
            spent = store().record(record, budgets().today() if budgets is not None else None)
            if spent is not None:
                self._invocation.spent_today = spent
        except Exception:
            log.exception("usage of a model call of mission %s (stage %s) not recorded", envelope.mission_id, stage)


def model_for(provider: LLMProvider, role: str) -> str:
    """The model a provider gives a role when the request names none (the environment's), if it says."""
    model_for = getattr(provider, "model_for", None)
    return str(model_for(role)) if callable(model_for) else provider.name


def reconcile_spend(services: StageServices, envelope: Envelope) -> None:
    """Before a mission ends: its cost, model calls and tokens are at least what its usage records say. A
    stage attempt that failed (a model call whose every attempt was abandoned, or whose answers were all
    refused) lost its envelope, and with it what it counted, but its records were kept as it went; so the
    final stage counts them, once per mission: a mission never shows a cost without the calls that made
    it. A store that fails is logged: what the envelope counted stands."""
    if services.usage is None:
        return
    try:
        records = list(services.usage().for_mission(envelope.mission_id))
    except Exception:
        log.exception("usage of mission %s not read: its cost is what its stages counted", envelope.mission_id)
        return
    counters = envelope.counters
    spent = round(sum(record.cost_usd for record in records), 8)
    if spent > counters.cost_usd + UNCOUNTED_USD:
        counters.cost_usd = spent
    # what a model generated, valid or not (an answer refused by its checks is an "error" with its tokens)
    answered = [r for r in records if r.outcome in ("ok", "error") and (r.tokens_in or r.tokens_out)]
    counters.llm_calls = max(counters.llm_calls, len(answered))
    counters.tokens_in = max(counters.tokens_in, sum(record.tokens_in for record in answered))
    counters.tokens_out = max(counters.tokens_out, sum(record.tokens_out for record in answered))


UNCOUNTED_USD = 1e-6  # below this, a difference is the rounding of the sums, not a lost attempt


def budget_stops(services: StageServices, invocation: Invocation, envelope: Envelope, spent_usd: float) -> bool:
    """Whether the user's daily budget ends the mission after a stage that spent `spent_usd` (with the
    branches it joined): the day's spend as its last paid call left it, or, when only its branches paid,
    read. A store that fails is logged: the mission goes on (its own `max_cost_usd` still binds)."""
    if services.budgets is None or spent_usd <= 0:
        return False
    try:
        budgets = services.budgets()
        today = invocation.spent_today
        if today is None:
            today = budgets.status(envelope.user_id).spent_usd
        return budgets.stops(envelope.user_id, today)
    except Exception:
        log.exception("daily budget of mission %s's user not checked", envelope.mission_id)
        return False
