"""Capability API v2: typed stage functions, checked when the capability loads, replayed when resumed."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from pydantic import BaseModel, Field

from missions.core.capability import registry as registry
from missions.core.capability.offline import SchemaAnswers, answer_for
from missions.core.capability.registry import Capability, Ctx, stage
from missions.core.capability.stages import StageSignatureError, check_stages
from missions.core.capability.tools import RiskLevel, ToolCatalog, ToolCategory, ToolEnv, ToolResult
from missions.core.llm.provider import LLMRequest, LLMResult
from missions.core.mission.envelope import InterruptKind
from missions.core.pipeline.config import AgentConfig, PipelineConfig, ToolAccess
from tests.support.driver import DirectDriver
from tests.support.stages import typed_capability


class Brief(BaseModel):
    topic: str
    depth: int = Field(ge=1, le=5)


class Draft(BaseModel):
    text: str


class Final(BaseModel):
    answer: str


@stage
def brief(ctx: Ctx) -> Brief:
    return ctx.think(Brief)


@stage
def write(ctx: Ctx, brief: Brief) -> Draft:
    return ctx.think(Draft, brief=brief)


@stage
def done(write: Draft | None) -> Final:
    return Final(answer=write.text if write else "nothing written")


PIPELINE = PipelineConfig(
    name="t_typed",
    agents=[
        AgentConfig(name="brief", has_llm=True, default_next="write"),
        AgentConfig(name="write", has_llm=True, default_next="done"),
        AgentConfig(name="done"),
    ],
)


def typed(*functions: Any, pipeline: PipelineConfig = PIPELINE, catalog: ToolCatalog | None = None) -> Capability:
    return typed_capability(
        pipeline.name,
        pipeline,
        *functions,
        description="typed stages",
        offline_policy=SchemaAnswers({"write": {"text": "A draft about {goal}"}}),
        catalog=catalog or ToolCatalog(),
        prompts={a.name: f"You are {a.name}." for a in pipeline.agents if a.has_llm},
        auto_approve_tools=frozenset({"notes.write"}),
    )


# -- wiring, checked when the capability loads ------------------------------------------------------


def test_stages_read_each_other_typed_and_the_mission_completes():
    # Given three typed stages: brief -> write (reads brief) -> done (reads write)
    driver = DirectDriver(typed(brief, write, done))
    envelope = driver.run("penguins")
    # Then each stage got the one before as its model, and the offline model filled what was not canned
    assert envelope.terminal_reason == "completed"
    assert envelope.outputs["write"] == {"text": "A draft about penguins"}
    assert envelope.outputs["done"] == {"answer": "A draft about penguins"}
    # brief left the envelope once write had read it; its checkpoint keeps it
    assert "brief" not in envelope.outputs
    assert driver.outputs(envelope)["brief"]["depth"] == 3  # inside its bounds (1-5)


def test_a_parameter_naming_no_stage_is_a_load_error_naming_the_file_and_parameter():
    @stage
    def write(ctx: Ctx, breif: Brief) -> Draft:  # the typo
        return Draft(text="")

    with pytest.raises(StageSignatureError, match=r"test_stages.py:\d+: parameter 'breif': no such stage"):
        typed(brief, write, done)


def test_reading_a_stage_as_the_wrong_model_is_a_load_error():
    @stage
    def done(write: Brief) -> Final:
        return Final(answer="")

    with pytest.raises(StageSignatureError, match="parameter 'write': stage 'write' returns Draft, not Brief"):
        typed(brief, write, done)


def test_a_stage_must_return_a_model_and_be_a_stage_of_the_pipeline():
    with pytest.raises(StageSignatureError, match="must return a pydantic model"):

        @stage
        def untyped(ctx: Ctx):  # type: ignore[no-untyped-def]
            return {}

    @stage
    def stray(ctx: Ctx) -> Final:
        return Final(answer="")

    with pytest.raises(StageSignatureError, match="'stray' is not a stage of the pipeline"):
        check_stages([stray], ["brief"], {})


def test_a_stage_sees_a_read_only_view():
    seen: dict[str, Any] = {}

    @stage
    def brief(ctx: Ctx) -> Brief:
        seen["ctx"] = ctx
        with pytest.raises(TypeError):
            ctx.context["injected"] = True  # type: ignore[index]
        ctx.counters.llm_calls = 99  # a copy: the mission's counters are not touched
        return ctx.think(Brief)

    envelope = DirectDriver(typed(brief, write, done)).run("penguins", context={"lang": "en"})
    assert seen["ctx"].context["lang"] == "en" and "injected" not in envelope.context
    assert envelope.counters.llm_calls == 2


# -- resume: nothing that ran before the question runs again ----------------------------------------


class Fickle:
    """A model that never answers the same way twice."""

    name = "fickle"

    def __init__(self) -> None:
        self.calls: list[str] = []
        self._n = itertools.count(1)

    def complete(self, request: LLMRequest) -> LLMResult:
        self.calls.append(request.stage)
        n = next(self._n)
        output = answer_for(request.output_model, {"text": f"answer #{n}", "topic": f"topic #{n}"})
        return LLMResult(output=output, model="fickle")


def test_a_resumed_stage_reuses_its_model_answers_and_tool_calls():
    # Given a stage that thinks, calls a tool, then asks the user to approve what it made
    ran: list[str] = []
    tools = ToolCatalog()

    class Note(BaseModel):
        text: str

    @tools.register("notes.read", "read the notes", Note)
    def read(p: Note) -> ToolResult:
        ran.append(f"read:{p.text}")
        return ToolResult.ok({"read": p.text})

    @tools.register("notes.write", "write a note", Note, category=ToolCategory.WRITE, risk=RiskLevel.WRITE)
    def note(p: Note) -> ToolResult:
        ran.append(f"write:{p.text}")
        return ToolResult.ok({"wrote": p.text})

    @stage
    def write(ctx: Ctx, brief: Brief) -> Draft:
        draft = ctx.think(Draft, brief=brief)
        ctx.tools.execute("notes.read", {"text": draft.text})
        ctx.tools.execute("notes.write", {"text": draft.text})
        answer = ctx.ask(InterruptKind.CONFIRMATION, f"Publish '{draft.text}'?")
        return Draft(text=f"{draft.text} ({'published' if answer.approved else 'kept'})")

    pipeline = PIPELINE.model_copy(
        update={
            "agents": [
                PIPELINE.agents[0],
                AgentConfig(
                    name="write", has_llm=True, has_tools=True, tool_access=ToolAccess.WRITE, default_next="done"
                ),
                PIPELINE.agents[2],
            ]
        }
    )
    model = Fickle()
    driver = DirectDriver(typed(brief, write, done, pipeline=pipeline, catalog=tools), llm=model)
    # When the user approves and the stage runs again from its start
    envelope = driver.run("penguins", answers=[{"approved": True}])
    # Then the model was asked once for the draft (the answer the user saw), and each tool ran once
    assert model.calls == ["brief", "write"]
    assert envelope.outputs["write"] == {"text": "answer #2 (published)"}
    assert ran == ["read:answer #2", "write:answer #2"]
    assert envelope.counters.llm_calls == 2 and envelope.counters.tool_calls == 2
    assert envelope.replay is None  # spent once the stage completed


def test_an_approved_tool_call_runs_exactly_the_call_the_user_saw_once_with_a_fickle_model():
    # Given a stage whose model proposes what a write tool does, and a model that never answers alike
    ran: list[str] = []
    tools = ToolCatalog()

    class Note(BaseModel):
        text: str

    @tools.register("notes.publish", "publish a note", Note, category=ToolCategory.WRITE, risk=RiskLevel.WRITE)
    def publish(p: Note) -> ToolResult:
        ran.append(p.text)
        return ToolResult.ok({"published": p.text})

    @stage
    def write(ctx: Ctx, brief: Brief) -> Draft:
        draft = ctx.think(Draft, brief=brief)
        result = ctx.tools.execute("notes.publish", {"text": draft.text})  # write risk: asks for approval
        return Draft(text=f"{draft.text}: {result.status}")

    pipeline = PIPELINE.model_copy(
        update={
            "agents": [
                PIPELINE.agents[0],
                AgentConfig(
                    name="write", has_llm=True, has_tools=True, tool_access=ToolAccess.WRITE, default_next="done"
                ),
                PIPELINE.agents[2],
            ]
        }
    )
    model = Fickle()
    capability = typed(brief, write, done, pipeline=pipeline, catalog=tools)
    capability.auto_approve_tools = frozenset()
    driver = DirectDriver(capability, llm=model)
    # When the user approves the one call they were shown
    envelope = driver.run("penguins", answers=[{"approved": True}])
    # Then they were asked once, about the model's first proposal, and exactly that call ran, once
    asked = [a for a in envelope.answers if a["kind"] == "confirmation"]
    assert len(asked) == 1 and "answer #2" in asked[0]["question"]
    assert model.calls == ["brief", "write"]
    assert ran == ["answer #2"]
    assert envelope.outputs["write"] == {"text": "answer #2: success"}


def test_a_stage_may_ask_a_follow_up_and_each_question_gets_its_own_answer_once():
    # Given a stage that asks, thinks with the answer, then asks a follow-up; a model never answering alike
    seen: list[tuple[str, ...]] = []

    @stage
    def write(ctx: Ctx, brief: Brief) -> Draft:
        first = ctx.ask(InterruptKind.CLARIFICATION, "Which penguins?")
        draft = ctx.think(Draft, brief=brief, which=first.text)
        second = ctx.ask(InterruptKind.CLARIFICATION, f"Anything to add to '{draft.text}'?")
        seen.append((first.text or "", second.text or ""))
        return Draft(text=f"{draft.text} | {first.text} | {second.text}")

    model = Fickle()
    driver = DirectDriver(typed(brief, write, done), llm=model)
    # When the user answers both questions
    envelope = driver.run("penguins", answers=[{"text": "emperors"}, {"text": "chicks"}])
    # Then each question was asked once and got its own answer; the model was asked once per think
    questions = [a["question"] for a in envelope.answers]
    assert questions == ["Which penguins?", "Anything to add to 'answer #2'?"]
    assert model.calls == ["brief", "write"]
    assert seen == [("emperors", "chicks")]
    assert envelope.outputs["write"] == {"text": "answer #2 | emperors | chicks"}


def test_a_tool_gets_the_missions_env_and_its_approval_shows_what_it_will_change():
    # Given a write tool that reads a secret through its env and previews its change as a diff
    tools = ToolCatalog()
    seen: list[tuple[str, str]] = []

    class Rename(BaseModel):
        old: str
        new: str

    def preview(p: Rename) -> dict[str, Any]:
        return {"diff": f"- {p.old}\n+ {p.new}"}

    @tools.register(
        "names.rename", "rename", Rename, category=ToolCategory.WRITE, risk=RiskLevel.WRITE, preview=preview
    )
    def rename(p: Rename, env: ToolEnv) -> ToolResult:
        seen.append((env.mission_id, env.secret("names-token")))
        return ToolResult.ok({"renamed": p.new})

    @stage
    def write(ctx: Ctx, brief: Brief) -> Draft:
        return Draft(text=ctx.tools.execute("names.rename", {"old": "a", "new": "b"}).status)

    pipeline = PIPELINE.model_copy(
        update={
            "agents": [
                PIPELINE.agents[0],
                AgentConfig(name="write", has_tools=True, tool_access=ToolAccess.WRITE, default_next="done"),
                PIPELINE.agents[2],
            ]
        }
    )
    capability = typed(brief, write, done, pipeline=pipeline, catalog=tools)
    capability.auto_approve_tools = frozenset()
    driver = DirectDriver(capability)
    driver.stores.secrets["names-token"] = "s3cret"
    asked: list[dict[str, Any]] = []

    def approve(interrupt: Any) -> dict[str, Any]:
        asked.append(interrupt["data"])
        return {"approved": True}

    envelope = driver.run("penguins", answer_with=approve)
    # Then the question carried the diff, and the tool ran once knowing its mission and its secret
    assert asked[0]["preview"] == {"diff": "- a\n+ b"}
    assert seen == [(envelope.mission_id, "s3cret")]
    assert envelope.outputs["write"] == {"text": "success"}


def test_a_stage_remembers_for_its_user_only_in_namespaces_named_after_its_capability():
    @stage
    def write(ctx: Ctx, brief: Brief) -> Draft:
        ctx.remember("t_typed.insights", "latest", {"topic": brief.topic})
        with pytest.raises(Exception, match="only write memory namespaces named after it"):
            ctx.remember("user_preferences", "x", 1)
        return Draft(text=str(ctx.recall("t_typed.insights", "latest")))

    remembering = PIPELINE.model_copy(
        update={
            "agents": [
                PIPELINE.agents[0],
                PIPELINE.agents[1].model_copy(update={"remembers": True}),
                PIPELINE.agents[2],
            ]
        }
    )
    driver = DirectDriver(typed(brief, write, done, pipeline=remembering))
    envelope = driver.run("penguins", user_id="ada")
    item = driver.stores.memory.get("ada", ("t_typed.insights",), "latest")
    assert item is not None and item.value == {"topic": driver.outputs(envelope)["brief"]["topic"]}
    assert driver.stores.memory.list("someone-else", ("t_typed.insights",)) == []
    # and a stage that does not declare it is stopped with the reason (in AWS it could not embed)
    undeclared = DirectDriver(typed(brief, write, done)).run("penguins")
    assert any("does not declare remembers = true" in e.message for e in undeclared.errors)


def test_a_stage_runs_an_analysis_script_in_the_sandbox_and_sees_a_broken_rule_as_a_result():
    seen: dict[str, Any] = {}

    @stage
    def write(ctx: Ctx, brief: Brief) -> Draft:
        summed = ctx.analyze("RESULT = {'total': sum(INPUT['values'])}", {"values": [1, 2, 3.5]})
        escaped = ctx.analyze("import socket\nsocket.create_connection(('example.org', 80))\nRESULT = {}")
        seen["summed"], seen["escaped"] = summed, escaped
        return Draft(text=str(summed.output))

    # Given a stage that declares it runs scripts (its function may invoke the sandbox in AWS)
    analyzing = PIPELINE.model_copy(
        update={
            "agents": [PIPELINE.agents[0], PIPELINE.agents[1].model_copy(update={"sandbox": True}), PIPELINE.agents[2]]
        }
    )
    driver = DirectDriver(typed(brief, write, done, pipeline=analyzing))
    envelope = driver.run("penguins")
    assert seen["summed"].status == "ok" and seen["summed"].output == {"total": 6.5}
    assert seen["escaped"].status == "error" and seen["escaped"].error_kind == "network"
    events, _ = driver.stores.events.read(envelope.mission_id, limit=500)
    ran = [e.payload for e in events if e.type.value == "analysis.completed"]
    assert [r["status"] for r in ran] == ["ok", "error"] and ran[1]["error_kind"] == "network"
    # and a stage that does not declare it is stopped with the reason, before AWS would deny it
    undeclared = DirectDriver(typed(brief, write, done)).run("penguins")
    assert any("does not declare sandbox = true" in e.message for e in undeclared.errors)


# -- the offline model -------------------------------------------------------------------------------


class Shape(BaseModel):
    kind: str = Field(pattern="^(a|b)$", examples=["a"])
    level: int = Field(ge=2, le=6)
    ratio: float = Field(gt=0, lt=1)
    tags: list[str] = Field(min_length=2)
    nested: Brief
    maybe: Draft | None
    flag: bool


def test_the_offline_model_answers_any_schema_and_takes_canned_values():
    made = answer_for(Shape, {"flag": False, "nested": {"topic": "{goal}", "depth": 1}}, goal="g")
    assert made.kind == "a" and 2 <= made.level <= 6 and 0 < made.ratio < 1 and len(made.tags) == 2
    assert made.flag is False and made.nested.topic == "{goal}"  # filling in the goal is SchemaAnswers' job
    policy = SchemaAnswers({"done": {"answer": "done: {goal}"}})
    request = LLMRequest(stage="done", role="done", messages=[], output_model=Final, envelope=registry)
    assert policy(request).answer == "done: "  # an envelope without a goal


def test_the_stage_an_answer_resumes_at_reads_it_and_the_model_gets_the_facts_typed():
    # Given brief -> write (asks which tone; the answer resumes at done) -> done, and a model that keeps requests
    seen: list[LLMRequest] = []

    class Keeping:
        name = "keeping"

        def complete(self, request: LLMRequest) -> LLMResult:
            seen.append(request)
            return LLMResult(output=answer_for(request.output_model, {"text": "draft"}), model="keeping")

    @stage
    def write(ctx: Ctx, brief: Brief) -> Draft:
        draft = ctx.think(Draft, brief=brief, tone="plain")
        ctx.report("source_failed", "the thesaurus was down")
        ctx.ask(InterruptKind.CHOICE, "Which tone?", options=["plain", "warm"])
        return draft

    @stage
    def done(ctx: Ctx, write: Draft | None) -> Final:
        assert ctx.answer is not None  # resumed here by the choice
        return Final(answer=f"{ctx.answer.decision} tone")

    pipeline = PIPELINE.model_copy(update={"resume": {InterruptKind.CHOICE: "done"}})
    envelope = DirectDriver(typed(brief, write, done, pipeline=pipeline), llm=Keeping()).run(
        "penguins", answers=[{"decision": "warm"}]
    )
    # Then the final stage read the answer, the error was recorded, and the model got the facts as JSON
    assert envelope.outputs["done"] == {"answer": "warm tone"}
    assert [(e.kind, e.message) for e in envelope.errors] == [("source_failed", "the thesaurus was down")]
    facts = seen[-1].facts
    assert facts["tone"] == "plain" and set(facts["brief"]) == {"topic", "depth"}
    assert 'Tone: "plain"' in seen[-1].messages[-1]["content"]


# -- the mission's own state, fan-out joins, evidence, artifacts, the end -----------------------------


class Tally(BaseModel):
    seen: list[str] = Field(default_factory=list)


class Split(BaseModel):
    parts: int


class Piece(BaseModel):
    part: str


class Joined(BaseModel):
    parts: list[str]


FANNED = PipelineConfig(
    name="t_fanned",
    agents=[
        AgentConfig(name="split", default_next="pieces"),
        AgentConfig(name="pieces", fan_out={"max_concurrency": 2}, default_next="join"),
        AgentConfig(name="join", default_next="end"),
        AgentConfig(name="end"),
    ],
)


@stage
def split(ctx: Ctx, state: Tally | None) -> Split:
    assert state is None  # nothing wrote the state yet
    ctx.fan_out([{"part": word} for word in ctx.goal.split()])
    ctx.update_state(Tally(seen=["split"]))
    return Split(parts=len(ctx.goal.split()))


@stage
def pieces(ctx: Ctx, item: dict[str, Any], state: Tally) -> Piece:
    assert state.seen == ["split"]  # an item reads the state
    return Piece(part=item["part"].upper())


@stage
def join(ctx: Ctx, items: list[Piece], state: Tally) -> Joined:
    ctx.update_state(Tally(seen=[*state.seen, "join"]))
    return Joined(parts=[piece.part for piece in items])


@stage
def end(ctx: Ctx, join: Joined, state: Tally) -> Final:
    return Final(answer=f"{' '.join(join.parts)} after {'+'.join(state.seen)}")


def test_a_fan_out_joins_typed_in_the_next_stage_and_the_state_carries_through():
    # Given a stage that fans out over the words of the goal and keeps a state
    envelope = DirectDriver(typed(split, pieces, join, end, pipeline=FANNED)).run("one two three")
    # Then each word ran once, the join read the items' outputs in order as their model, and the
    # state the sequential stages updated reached the final stage
    assert envelope.terminal_reason == "completed"
    assert envelope.outputs["end"] == {"answer": "ONE TWO THREE after split+join"}
    assert envelope.state == {"seen": ["split", "join"]}
    assert envelope.work_items is None


def test_a_fan_out_item_cannot_change_the_state():
    @stage
    def pieces(ctx: Ctx, item: dict[str, Any], state: Tally) -> Piece:
        ctx.update_state(Tally(seen=["item"]))
        return Piece(part=item["part"])

    envelope = DirectDriver(typed(split, pieces, join, end, pipeline=FANNED)).run("one")
    assert envelope.terminal_reason.startswith("stage_failed")
    assert any("cannot change the mission state" in e.message for e in envelope.errors)


def test_the_state_is_one_model_across_stages():
    @stage
    def join(ctx: Ctx, items: list[Piece], state: Brief) -> Joined:
        return Joined(parts=[])

    with pytest.raises(StageSignatureError, match="'state' names different models"):
        typed(split, pieces, join, end, pipeline=FANNED)


def test_items_are_only_for_the_stage_after_a_fan_out():
    @stage
    def write(ctx: Ctx, items: list[Brief]) -> Draft:
        return Draft(text="")

    with pytest.raises(StageSignatureError, match="'items' is only for the stage after a fan-out stage"):
        typed(brief, write, done)


@pytest.mark.parametrize(("failed", "status"), [(False, "completed"), (True, "failed")])
def test_a_final_stage_that_says_the_mission_failed_ends_it_failed_with_its_reason(failed: bool, status: str):
    # Given a final stage that found the outside world refused what the mission was for
    @stage
    def done(ctx: Ctx, write: Draft) -> Final:
        ctx.end_reason("deploy_refused", failed=failed)
        ctx.end_reason("later_reasons_do_not_replace_it", failed=not failed)
        return Final(answer="Home Assistant refused it")

    @stage
    def write(ctx: Ctx, brief: Brief) -> Draft:
        return Draft(text="x")

    driver = DirectDriver(typed(brief, write, done))
    # When the mission runs to its end
    envelope = driver.run("penguins")
    # Then its reason is the first one named, and it is failed only when the stage said so, never completed
    assert envelope.terminal_reason == "deploy_refused"
    record = driver.stores.missions.get(envelope.mission_id)
    assert record.status == status and record.terminal_reason == "deploy_refused"


def test_the_final_stage_names_why_the_mission_ended_and_reads_its_artifacts_and_evidence():
    seen: dict[str, Any] = {}

    @stage
    def write(ctx: Ctx, brief: Brief) -> Draft:
        ctx.save_artifact("drafts/note", {"text": "v1"})
        with pytest.raises(Exception, match="only the final stage"):
            ctx.end_reason("nope")
        return Draft(text="x")

    @stage
    def done(ctx: Ctx, write: Draft) -> Final:
        ctx.save_artifact("drafts/note", {"text": "v2"})  # one version per stage run and path
        seen["latest"], seen["first"] = ctx.artifact("drafts/note"), ctx.artifact("drafts/note", 1)
        seen["citations"] = ctx.citations
        ctx.end_reason("nothing_to_do")
        return Final(answer="")

    envelope = DirectDriver(typed(brief, write, done)).run("penguins")
    assert envelope.terminal_reason == "nothing_to_do"
    assert seen["latest"] == {"text": "v2"} and seen["first"] == {"text": "v1"}
    assert seen["citations"] == ()
