"""Repair before failing: a stage's model answer that breaks a rule (not a valid output even after JSON
repair, a citation of evidence no tool returned, a tool call the catalog refuses: an `InvalidAnswer`) is
shown to the model, its own answer and the exact errors, and the model is asked again, at most `limit`
times per `think`. Each attempt is one model call like the first (ModelCalls.complete), so it counts against
max_llm_calls and max_cost_usd, and a repair is asked only while both leave room. A repaired answer is
validated exactly like the first (the same schema, the same check); the attempts it took are recorded as the
mission's errors. When no repair is left the stage fails with `RepairsExhausted`, which lists every attempt's
errors (the failure path records each) and is never retried: the mission ends through its final stage.

Only the latest attempt is shown: the prompt stays as long as one repair's, however many the setting allows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from missions.core.capability.registry import StageContext
from missions.core.capability.stages import Check
from missions.core.errors import InvalidAnswer, RepairsExhausted
from missions.core.llm.provider import InvalidOutput
from missions.service.runner._model import ModelCalls

SHOWN_ANSWER = 6_000  # characters of the model's own answer it is shown again
SHOWN_SCHEMA = 4_000  # characters of the output's JSON schema, after an answer that did not fit it


@dataclass(eq=False)
class Repairs:
    _model: ModelCalls
    _limit: int  # repairs per think (settings.model_repairs)

    def think(
        self,
        ctx: StageContext,
        messages: list[dict[str, str]],
        output_model: type[BaseModel],
        facts: dict[str, Any],
        check: Check | None = None,
    ) -> BaseModel:
        """The stage's answer as `output_model` that passes `check`, asking again after each invalid one."""
        envelope, stage = ctx.envelope, ctx.agent.name
        failed: list[tuple[str, str]] = []  # each invalid attempt: (kind, errors)
        asked = messages
        while True:
            answer: BaseModel | None = None
            try:
                answer = self._model.complete(ctx, asked, output_model, facts, repair=len(failed))
                if check is not None:
                    check(answer)
            except InvalidAnswer as invalid:
                errors = invalid.errors if isinstance(invalid, InvalidOutput) and invalid.errors else str(invalid)
                failed.append((type(invalid).__name__, errors))
                stopped = self._stopped(ctx, len(failed))
                if stopped is not None:
                    raise RepairsExhausted(stage, failed, stopped) from invalid
                asked = [*messages, *_repair_request(output_model, _content(invalid, answer), errors, invalid)]
                continue
            for number, (kind, errors) in enumerate(failed, 1):  # kept: the mission shows what was repaired
                envelope.record_error(stage, kind, f"attempt {number} (repaired by asking again): {errors}")
            return answer

    def _stopped(self, ctx: StageContext, attempts: int) -> str | None:
        """Why no repair follows attempt number `attempts`, or None when one may."""
        counters, bounds = ctx.envelope.counters, ctx.envelope.bounds
        if attempts > self._limit:
            return f"with the {self._limit} repair(s) a stage is allowed (setting model_repairs)"
        if counters.llm_calls >= bounds.max_llm_calls:
            return f"and max_llm_calls ({bounds.max_llm_calls}) left no call to repair it"
        if counters.cost_usd >= bounds.max_cost_usd:
            return f"and max_cost_usd ({bounds.max_cost_usd}) left no budget to repair it"
        return None


def _content(invalid: InvalidAnswer, answer: BaseModel | None) -> str:
    """The answer as the model gave it: its text when it did not parse, else the output it parsed to."""
    if isinstance(invalid, InvalidOutput):
        return invalid.content
    return answer.model_dump_json() if answer is not None else ""


def _repair_request(
    output_model: type[BaseModel], content: str, errors: str, invalid: InvalidAnswer
) -> list[dict[str, str]]:
    """The model's own answer, then what is wrong with it and what is expected instead."""
    shown = content if len(content) <= SHOWN_ANSWER else content[:SHOWN_ANSWER] + "…"
    lines = [
        f"Your answer is not valid: {errors}",
        f"Answer again with the whole {output_model.__name__}, as JSON only, with these errors fixed"
        " and nothing else changed that was right.",
    ]
    if isinstance(invalid, InvalidOutput):  # it did not fit the schema: say which
        schema = json.dumps(output_model.model_json_schema(), separators=(",", ":"))
        lines.append(f"Its JSON schema: {schema[:SHOWN_SCHEMA]}")
    return [{"role": "assistant", "content": shown or "(no answer)"}, {"role": "user", "content": "\n".join(lines)}]
