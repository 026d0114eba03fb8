"""Repair before failing: a model answer that is not valid (its schema, a stage's check) is shown to the model
with its errors and the model asked again, within the stage's repairs and the mission's bounds; then the stage
fails with every attempt's errors (the StageRunner over a real ResilientProvider and a scripted backend,
driven by the DirectDriver, the state machine's stand-in)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from missions.adapters.llm.resilient import Answer, ResilientProvider
from missions.adapters.memory.agents import InMemoryUsageStore
from missions.app.runtime import Runtime
from missions.core.capability.registry import Capability, Ctx, EvidenceChainViolation, InvalidAnswer, stage
from missions.core.cost.pricing import Price
from missions.core.llm.provider import InvalidOutput, LLMRequest
from missions.core.mission.envelope import Envelope, InterruptKind
from missions.core.pipeline.config import AgentConfig
from missions.core.settings import RuntimeSettings
from tests.support.aws import use_fake_aws
from tests.support.driver import DirectDriver
from tests.support.runner import final, make
from tests.support.stages import typed_capability

PER_CALL = 0.00012  # 100 tokens in at $1/M, 10 out at $2/M
GOOD, MADE_UP, PROSE = '{"verdict": "yes"}', '{"verdict": "made-up"}', "I would say yes."


class Verdict(BaseModel):
    verdict: str


def known(said: Verdict) -> None:
    """The stage's rule beyond the schema, as an evidence check is: only what it knows."""
    if said.verdict not in ("yes", "no"):
        raise EvidenceChainViolation(f"verdict {said.verdict!r} is none of the known ones (yes, no)")


class Scripted:
    """A model backend answering each call with the next of its answers (the last one again after them)."""

    name = "scripted-backend"

    def __init__(self, *answers: str):
        self.answers, self.asked = list(answers), []

    def call(self, model: str, request: LLMRequest, timeout: float) -> Answer:
        self.asked.append(list(request.messages))
        content = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return Answer(content, model, tokens_in=100, tokens_out=10)

    def probe(self, model: str, timeout: float) -> None: ...


def judging(check: bool = True, then_ask: bool = False) -> Capability:
    @stage
    def judge(ctx: Ctx) -> Verdict:
        said = ctx.think(Verdict, known if check else None)
        if then_ask:
            ctx.ask(InterruptKind.CLARIFICATION, "Sure?")
        return said

    agents = [AgentConfig(name="judge", has_llm=True, default_next="done"), AgentConfig(name="done")]
    return make("t_repairs", agents, judge, final())


def run(
    *answers: str, repairs: int = 2, check: bool = True, then_ask: bool = False, **bounds: Any
) -> tuple[Envelope, DirectDriver, Scripted, InMemoryUsageStore]:
    backend, usage = Scripted(*answers), InMemoryUsageStore()
    provider = ResilientProvider(backend, default_model="m", prices={"m": Price((1.0, 2.0))}, sleep=lambda s: None)
    driver = DirectDriver(judging(check, then_ask), llm=provider, usage=usage)
    driver.services.repairs = repairs
    env = driver.run("is it?", bounds=bounds, answers=[{"text": "yes"}] if then_ask else None)
    return env, driver, backend, usage


def test_an_answer_that_is_not_json_is_asked_again_with_its_errors_and_the_repair_completes():
    # Given a model answering prose first, then the JSON its stage asks for
    env, driver, backend, usage = run(PROSE, GOOD)
    # Then the mission completed with the repaired answer
    assert env.terminal_reason == "completed"
    assert env.outputs["judge"] == {"verdict": "yes"}
    # and both calls were counted against the bounds, their tokens and their cost summed
    assert (env.counters.llm_calls, env.counters.tokens_in, env.counters.tokens_out) == (2, 200, 20)
    assert env.counters.cost_usd == pytest.approx(2 * PER_CALL)
    records = usage.for_mission(env.mission_id)
    assert [(r.outcome, r.tokens_in, r.cost_usd) for r in records] == [("error", 100, PER_CALL), ("ok", 100, PER_CALL)]
    # and the second call showed the model its own answer, then what was wrong and what is expected
    first, second = backend.asked
    assert second[: len(first)] == first
    shown, told = second[len(first) :]
    assert shown == {"role": "assistant", "content": PROSE}
    assert told["role"] == "user" and "Verdict" in told["content"] and "JSON schema" in told["content"]
    # and the mission keeps the attempt that was repaired
    [error] = env.errors
    assert (error.stage, error.kind) == ("judge", "InvalidOutput")
    assert error.message.startswith("attempt 1 (repaired by asking again): ")


def test_a_check_refusing_an_answer_is_told_to_the_model_and_a_good_answer_completes():
    # Given a model naming what the stage does not know first (as a citation no tool returned), then a known one
    env, _, backend, _ = run(MADE_UP, GOOD)
    # Then the mission completed with it, after one repair naming the refused answer and why
    assert env.terminal_reason == "completed" and env.outputs["judge"] == {"verdict": "yes"}
    assert env.counters.llm_calls == 2
    shown, told = backend.asked[1][-2:]
    assert shown["content"] == '{"verdict":"made-up"}'
    assert "verdict 'made-up' is none of the known ones" in told["content"]
    assert [e.kind for e in env.errors] == ["EvidenceChainViolation"]


def test_an_answer_invalid_every_time_fails_the_stage_after_its_repairs_with_every_attempts_errors():
    # Given a model that never answers as asked
    env, driver, backend, usage = run(PROSE)
    # Then it was asked three times (the answer, two repairs), and the stage failed through the final stage
    assert len(backend.asked) == 3
    assert env.terminal_reason == "stage_failed:judge"
    assert [(s.stage, s.mode) for s in driver.steps] == [("judge", "run"), ("done", "finalize")]
    record = driver.stores.missions.get(env.mission_id)
    assert (record.status, record.terminal_reason) == ("failed", "stage_failed:judge")
    # with why no repair followed, then each attempt's errors
    assert [e.kind for e in env.errors] == ["RepairsExhausted"] + ["InvalidOutput"] * 3
    assert "invalid 3 time(s), with the 2 repair(s) a stage is allowed" in env.errors[0].message
    assert [e.message.split(":")[0] for e in env.errors[1:]] == ["attempt 1", "attempt 2", "attempt 3"]
    assert all("Invalid JSON" in e.message for e in env.errors[1:])
    # and every call was paid for and recorded
    records = usage.for_mission(env.mission_id)
    assert [r.outcome for r in records] == ["error"] * 3
    # and the failed mission counts them: no cost without the calls and tokens that made it
    assert env.counters.llm_calls == 3 and env.counters.tokens_in == sum(r.tokens_in for r in records) > 0
    assert env.counters.cost_usd == pytest.approx(sum(r.cost_usd for r in records))


def test_a_repaired_answer_is_checked_like_the_first():
    # Given a model whose repair fits the schema but breaks the stage's rule, and whose next answer keeps both
    env, _, backend, _ = run(PROSE, MADE_UP, GOOD)
    # Then the rule refused the repair too: the third answer is the one kept
    assert env.terminal_reason == "completed" and env.outputs["judge"] == {"verdict": "yes"}
    assert [e.kind for e in env.errors] == ["InvalidOutput", "EvidenceChainViolation"]
    # and with one repair allowed, the same repair fails the stage: never is an unchecked answer kept
    env, _, _, _ = run(PROSE, MADE_UP, GOOD, repairs=1)
    assert env.terminal_reason == "stage_failed:judge" and "judge" not in env.outputs
    assert [e.kind for e in env.errors] == ["RepairsExhausted", "InvalidOutput", "EvidenceChainViolation"]


@pytest.mark.parametrize(
    ("bounds", "calls", "why"),
    [
        ({"max_llm_calls": 2}, 2, "max_llm_calls (2) left no call to repair it"),
        ({"max_cost_usd": PER_CALL}, 1, f"max_cost_usd ({PER_CALL}) left no budget to repair it"),
    ],
    ids=["max_llm_calls", "max_cost_usd"],
)
def test_repairs_stop_at_the_missions_bounds(bounds, calls, why):
    # Given a model that never answers as asked, in a mission bounded below its stage's repairs
    env, _, backend, _ = run(PROSE, **bounds)
    # Then no call past the bound was made, and the mission failed saying why no repair followed
    assert len(backend.asked) == calls
    assert env.terminal_reason == "stage_failed:judge"
    assert why in env.errors[0].message
    assert len(env.errors) == 1 + calls


def test_no_repairs_when_the_setting_allows_none():
    # Given model_repairs = 0
    env, _, backend, _ = run(PROSE, GOOD, repairs=0)
    # Then the first invalid answer fails the stage, as before repairs existed
    assert len(backend.asked) == 1
    assert env.terminal_reason == "stage_failed:judge"


def test_a_repaired_answer_is_the_one_replayed_after_a_question():
    # Given a stage that thinks (repaired once) and then asks its user
    env, driver, backend, _ = run(PROSE, GOOD, '{"verdict": "no"}', then_ask=True)
    # Then on resume the repaired answer was replayed: the model was not asked again
    assert [s.mode for s in driver.steps][:2] == ["run", "run"]
    assert env.terminal_reason == "completed"
    assert env.outputs["judge"] == {"verdict": "yes"}
    assert len(backend.asked) == 2


def test_an_offline_policy_answering_wrong_then_right_is_repaired():
    # Given the offline (scripted) provider, whose policy leaves out a required field the first time
    asked: list[LLMRequest] = []

    def policy(request: LLMRequest) -> dict[str, Any]:
        asked.append(request)
        return {} if len(asked) == 1 else {"verdict": "no"}

    @stage
    def judge(ctx: Ctx) -> Verdict:
        return ctx.think(Verdict, known)

    agents = [AgentConfig(name="judge", has_llm=True, default_next="done"), AgentConfig(name="done")]
    driver = DirectDriver(typed_capability("t_offline_repair", agents, judge, final(), offline_policy=policy))
    # When the mission runs
    env = driver.run("is it?")
    # Then the policy was asked again, shown its answer and the missing field, and the mission completed
    assert env.terminal_reason == "completed" and env.outputs["judge"] == {"verdict": "no"}
    assert asked[1].messages[-2] == {"role": "assistant", "content": "{}"}
    assert "verdict: Field required" in asked[1].messages[-1]["content"]
    assert env.counters.llm_calls == 2


def test_a_check_raises_an_invalid_answer():
    # The rule a check keeps is an InvalidAnswer, which the runner knows how to repair
    assert issubclass(EvidenceChainViolation, InvalidAnswer)


def test_an_invalid_answer_quoting_a_secret_is_redacted_and_still_carries_its_answer_and_cost():
    # Given a provider knowing its key, and a model answering prose that quotes it
    key = "sk-repair-0123456789abcdef"
    backend = Scripted(f"my key is {key}")
    provider = ResilientProvider(backend, default_model="m", prices={"m": Price((1.0, 2.0))}, secrets=(key,))
    request = LLMRequest(stage="judge", role="judge", messages=[{"role": "user", "content": "?"}], output_model=Verdict)
    # When it answers
    with pytest.raises(InvalidOutput) as caught:
        provider.complete(request)
    # Then the error's message does not quote the key, and what the stage needs to ask again came along
    assert key not in str(caught.value)
    assert caught.value.content == f"my key is {key}" and caught.value.errors
    assert caught.value.spent is not None and caught.value.spent.cost_usd == pytest.approx(PER_CALL)


def test_the_setting_reaches_every_stage_runner(monkeypatch: pytest.MonkeyPatch):
    use_fake_aws(monkeypatch)  # the runtime makes its (unused) clients
    # Given MISSIONS_MODEL_REPAIRS=0 in a function's environment (cdk.json's llm.repairs)
    tables = {
        f"MISSIONS_{name.upper()}_TABLE": f"t-{name}" for name in ("missions", "checkpoints", "events", "interrupts")
    }
    settings = RuntimeSettings.from_env({**tables, "MISSIONS_BLOB_BUCKET": "blobs", "MISSIONS_MODEL_REPAIRS": "0"})
    # Then its stage runners ask no model again; and by default they ask twice
    assert Runtime(settings).runner("fitness_coach").services.repairs == 0
    assert RuntimeSettings.from_env({**tables, "MISSIONS_BLOB_BUCKET": "blobs"}).model_repairs == 2
