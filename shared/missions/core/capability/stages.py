"""Stages as typed functions: the Python half of a capability (capability API v2).

A stage is a plain function named after its stage in capability.toml. It gets what it asks
for by parameter, and returns its output as a pydantic model:

    @stage
    def workout(ctx: Ctx, assess: Assessment) -> WorkoutPlan:
        return ctx.think(WorkoutPlan, assessment=assess)

- a parameter named after another stage gets that stage's output as that stage's model (its
  return annotation); the name and the type are checked when the capability loads, and a typo
  or a mismatch is a load error naming the file, the line and the parameter;
- `ctx` (a `Ctx`) is a read-only view of the mission: the goal, the context, earlier answers,
  counters and bounds (copies), and the ways to act: `think` (the stage's model, typed),
  `ask` (a human), `tools`, `fan_out`, `save_artifact`, `repository_root`;
- `item` is the work item of a fan-out stage's run (the stage's function runs once per item of
  the list the stage before it gave `ctx.fan_out`); the stage after it takes `items`, the typed
  outputs of those runs, in order (the join);
- `state` is the mission's own state, if the capability keeps one: a model any stage may replace
  with `ctx.update_state(new)` (applied when the stage returns; not from a fan-out item or a
  parallel branch), read by every stage that takes it (`S | None` before a stage wrote it).

A stage never sees the envelope, so it cannot bend counters, bounds or routing; its output is
what routing rules read (dumped to JSON). Asking a human: `answer = ctx.ask(...)` raises the
question the first time; when the mission resumes at this stage, the function runs again and
`ask` returns the answer. Nothing that ran before the question runs again: every `think` and
every tool call of the attempt that asked is kept with the question and replayed in order
(see `Replay`), so a model that never answers twice the same way is asked once. The same holds
for an approval: a tool call with side effects asks first (a confirmation naming the call), and
on approval the stage runs again with the model's answers replayed, so exactly the call the user
saw runs, once (its call id is its tool and parameters; the journal keeps a retry from repeating it).
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from missions.core.errors import DelegationFailed, StageDefinitionError
from missions.core.mission.envelope import Bounds, Citation, Counters, InterruptKind, InterruptResponse
from missions.core.sandbox import SandboxRequest, SandboxResult, Tier

M = TypeVar("M", bound=BaseModel)
# a rule a model's answer must keep beyond its schema: raises an InvalidAnswer (missions.core.errors) naming
# what is wrong, which the model is shown to answer again
Check = Callable[[Any], None]
Option = TypeVar("Option", bound=Mapping[str, Any])  # an option offered to choose from

SPECIAL_PARAMETERS = ("ctx", "item", "items", "state")


class InterruptRequested(Exception):
    """Raised to ask a human; the runner turns it into an interrupt."""

    def __init__(
        self,
        kind: InterruptKind,
        question: str,
        *,
        options: list[str] | None = None,
        data: dict[str, Any] | None = None,
    ):
        super().__init__(question)
        self.kind, self.question = kind, question
        self.options, self.data = options or [], data or {}


class StageSignatureError(ValueError):
    """A stage function that cannot be wired; the message names its file, line and parameter."""


@dataclass(frozen=True)
class StageFunction:
    """A stage function and what it asks for, read from its signature once."""

    name: str
    func: Callable[..., BaseModel]
    output: type[BaseModel]
    reads: Mapping[str, type[BaseModel]]  # other stage -> the model the function expects of it
    wants: frozenset[str]  # which of ctx, item, items it takes
    items_model: type[BaseModel] | None = None
    optional: frozenset[str] = frozenset()  # reads annotated `X | None`
    state_model: type[BaseModel] | None = None  # the mission state it reads (parameter `state`)
    state_optional: bool = False

    @property
    def where(self) -> str:
        code = getattr(self.func, "__code__", None)
        return f"{code.co_filename}:{code.co_firstlineno}" if code else self.name


def stage(func: Callable[..., Any]) -> StageFunction:
    """Declare a stage function (the stage's name is the function's)."""
    where = _where(func)
    hints = _hints(func, where)
    output = hints.pop("return", None)
    if not (isinstance(output, type) and issubclass(output, BaseModel)):
        raise StageSignatureError(f"{where}: stage '{func.__name__}' must return a pydantic model (annotate it)")
    reads: dict[str, type[BaseModel]] = {}
    wants: set[str] = set()
    optional: set[str] = set()
    items_model = None
    state_model: type[BaseModel] | None = None
    state_optional = False
    for name in inspect.signature(func).parameters:
        annotation = hints.get(name)
        if name == "state":
            state_optional = _optional_model(annotation) is not None
            state_model = _optional_model(annotation) or (
                annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
            )
            if state_model is None:
                raise StageSignatureError(f"{where}: parameter 'state' must be annotated with the state's model")
            wants.add(name)
        elif name in ("ctx", "item"):
            wants.add(name)
        elif name == "items":
            wants.add(name)
            args = typing.get_args(annotation)
            items_model = args[0] if args and isinstance(args[0], type) and issubclass(args[0], BaseModel) else None
            if items_model is None:
                raise StageSignatureError(f"{where}: parameter 'items' must be annotated list[<the fan-out model>]")
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            reads[name] = annotation
        elif (model := _optional_model(annotation)) is not None:
            reads[name] = model  # `X | None`: None when that stage has not run (the failure path)
            optional.add(name)
        else:
            raise StageSignatureError(
                f"{where}: parameter '{name}' of stage '{func.__name__}' must be ctx, item, items, or another "
                "stage's name annotated with that stage's output model"
            )
    return StageFunction(
        func.__name__,
        func,
        output,
        reads,
        frozenset(wants),
        items_model,
        frozenset(optional),
        state_model,
        state_optional,
    )


def check_stages(functions: Sequence[StageFunction], stage_names: Sequence[str], fan_outs: Mapping[str, str]) -> None:
    """Every function names a stage, and reads only stages that exist, as the models they return.

    `fan_outs` maps a fan-out stage to its join: the join's `items` must be the fan-out stage's model."""
    by_name = {function.name: function for function in functions}
    states = {function.state_model for function in functions if function.state_model is not None}
    if len(states) > 1:
        named = ", ".join(f"{f.name} ({f.state_model.__name__})" for f in functions if f.state_model is not None)
        raise StageSignatureError(f"parameter 'state' names different models across stages: {named}")
    for function in functions:
        if function.name not in stage_names:
            raise StageSignatureError(
                f"{function.where}: '{function.name}' is not a stage of the pipeline ({', '.join(stage_names)})"
            )
        for name, model in function.reads.items():
            if name not in stage_names:
                raise StageSignatureError(f"{function.where}: parameter '{name}': no such stage")
            source = by_name.get(name)
            if source is None:
                raise StageSignatureError(f"{function.where}: parameter '{name}': that stage has no function")
            if source.output is not model:
                raise StageSignatureError(
                    f"{function.where}: parameter '{name}': stage '{name}' returns {source.output.__name__}, "
                    f"not {model.__name__}"
                )
        if function.items_model is not None:
            fanned = [source for source, join in fan_outs.items() if join == function.name]
            producer = by_name.get(fanned[0]) if fanned else None
            if producer is None:
                raise StageSignatureError(
                    f"{function.where}: 'items' is only for the stage after a fan-out stage (its join)"
                )
            if producer.output is not function.items_model:
                raise StageSignatureError(
                    f"{function.where}: parameter 'items': stage '{producer.name}' returns "
                    f"{producer.output.__name__}, not {function.items_model.__name__}"
                )


class Memory(Protocol):
    """The user's long-term memory as a stage sees it (the runtime binds the user and checks namespaces)."""

    def put(self, namespace: str, key: str, value: Any) -> None: ...

    def get(self, namespace: str, key: str | None) -> Any: ...


@dataclass
class Replay:
    """What a stage's attempt did before it asked a human, replayed when it resumes there."""

    thoughts: list[Any] = field(default_factory=list)  # each think's answer, as JSON, in order
    tools: dict[str, Any] = field(default_factory=dict)  # call key -> ToolCallRecord JSON
    answers: list[Any] = field(default_factory=list)  # the answers its earlier questions got, in order

    def to_json(self) -> dict[str, Any]:
        return {"thoughts": self.thoughts, "tools": self.tools, "answers": self.answers}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Replay:
        data = data or {}
        return cls(list(data.get("thoughts", [])), dict(data.get("tools", {})), list(data.get("answers", [])))


class Ctx:
    """The read-only view of the mission a stage function gets, and the ways it may act."""

    def __init__(
        self,
        *,
        stage: str,
        goal: str,
        context: Mapping[str, Any],
        answers: Sequence[Mapping[str, Any]],
        counters: Counters,
        bounds: Bounds,
        answer: InterruptResponse | None,
        think: Callable[[type[BaseModel], Mapping[str, Any], Check | None], BaseModel],
        tools: Any,
        fan_out: Callable[[list[Any]], None],
        save_artifact: Callable[[str, Any], Any],
        repository_root: Callable[[], str],
        failure: Mapping[str, Any] | None = None,
        report: Callable[[str, str], None] | None = None,
        terminal_reason: str | None = None,
        citations: Sequence[Citation] = (),
        update_state: Callable[[BaseModel], None] | None = None,
        read_artifact: Callable[[str, int | None], Any] | None = None,
        end_reason: Callable[[str, bool], None] | None = None,
        asked: list[InterruptResponse] | None = None,
        memory: Memory | None = None,
        analyze: Callable[[SandboxRequest], SandboxResult] | None = None,
        delegates_to: Sequence[str] = (),
    ):
        self.stage = stage
        self.terminal_reason = terminal_reason  # set when a bound or the failure path is ending the mission
        self.goal = goal
        self.failure = MappingProxyType(dict(failure)) if failure else None  # why the mission is ending (final stage)
        self._context, self._answers, self._counters, self._bounds = context, answers, counters, bounds
        self._answer = answer
        # the answers this attempt's questions get, in order: those an earlier attempt of this stage
        # got, then the one it resumed with; a question past them is asked (the attempt ends)
        self._asked = list(asked) if asked is not None else ([answer] if answer is not None else [])
        self.answered: list[InterruptResponse] = []  # what this attempt's questions were answered
        self._think = think
        self.tools = tools
        self._fan_out = fan_out
        self._save = save_artifact
        self._root = repository_root
        self._report = report
        self._citations = citations
        self._update_state = update_state
        self._read_artifact = read_artifact
        self._end_reason = end_reason
        self._memory = memory
        self._analyze = analyze
        self._delegates_to = tuple(delegates_to)

    # read-only copies, made on first use (most stages read little of the mission)

    @cached_property
    def context(self) -> Mapping[str, Any]:
        return MappingProxyType(json.loads(json.dumps(dict(self._context), default=str)))

    @cached_property
    def answers(self) -> tuple[Mapping[str, Any], ...]:
        return tuple(MappingProxyType(json.loads(json.dumps(dict(a), default=str))) for a in self._answers)

    @cached_property
    def counters(self) -> Counters:
        return self._counters.model_copy()

    @cached_property
    def bounds(self) -> Bounds:
        return self._bounds.model_copy()

    @cached_property
    def citations(self) -> tuple[Citation, ...]:
        """Every line a tool returned in this mission: the evidence a claim may cite."""
        return tuple(citation.model_copy() for citation in self._citations)

    @property
    def answer(self) -> InterruptResponse | None:
        """The answer this stage was resumed with (a stage another one's question resumes at), else None."""
        return self._answer

    def think(self, model: type[M], check: Callable[[M], None] | None = None, /, **facts: Any) -> M:
        """The stage's model answering as `model`: its prompt, the goal, the context and these facts
        (`ctx.think(Model, check, **facts)`; `check` is positional, so no fact's name is taken).

        An answer that is not a valid `model`, or that `check` refuses (it raises an InvalidAnswer, e.g.
        EvidenceChainViolation, naming what is wrong), is shown to the model with its errors and the model
        asked again, at most `model_repairs` times (a setting) and within the mission's bounds; then the stage
        fails. The answer returned has passed `check`, whoever gave it (a repair, a replay after a resume)."""
        answer = self._think(model, facts, check)
        assert isinstance(answer, model)
        if check is not None:
            check(answer)
        return answer

    def ask(
        self,
        kind: InterruptKind,
        question: str,
        *,
        options: list[str] | None = None,
        data: dict[str, Any] | None = None,
    ) -> InterruptResponse:
        """The human's answer when the mission resumed here; otherwise ask (this attempt ends).

        A stage may ask more than once (a follow-up question): each `ask` gets its own answer, in
        order, as the attempts before replay them."""
        if self._asked:
            answer = self._asked.pop(0)
            self.answered.append(answer)
            return answer
        raise InterruptRequested(kind, question, options=options, data=data)

    def delegate(self, capability: str, goal: str, output: type[M], *, context: Mapping[str, Any] | None = None) -> M:
        """Hand part of the work to another capability: a sub-mission of its own (the same user, within what
        is left of this mission's cost bound), whose final output is returned as `output` when it ends.
        This stage waits at no compute cost meanwhile (this attempt ends; it is run again with the result,
        what it did before replayed, as after a question). DelegationFailed when the sub-mission failed,
        was cancelled or refused, or its output does not fit `output`. The capability must be one the
        pipeline declares (`delegates_to`)."""
        if capability not in self._delegates_to:
            raise StageDefinitionError(
                f"stage '{self.stage}' delegates to '{capability}', which its pipeline does not declare in delegates_to"
            )
        if self._asked:
            ended = self._asked.pop(0)
            self.answered.append(ended)
            return delegated_output(capability, ended, output)
        data = {
            "capability": capability,
            "goal": goal,
            "context": json.loads(json.dumps(dict(context or {}), default=str)),
        }
        raise InterruptRequested(InterruptKind.DELEGATION, goal, data=data)

    def choose(
        self,
        question: str,
        options: Sequence[Option],
        describe: Callable[[Option], str],
        *,
        decline: str,
    ) -> InterruptResponse:
        """Ask the user to pick one of `options` (each has an `id`), numbered and each described in a line,
        by its number or id, or to answer `decline` to refuse them all."""
        lines = "\n".join(f"{i}. {describe(option)}" for i, option in enumerate(options, 1))
        return self.ask(
            InterruptKind.CHOICE,
            f"{question}\n{lines}\nAnswer with its number or id, or '{decline}'.",
            options=[option["id"] for option in options] + [decline],
            data={"options": list(options)},
        )

    def report(self, kind: str, message: str) -> None:
        """Record an error the mission should show (a source that failed) without failing the stage."""
        if self._report is not None:
            self._report(kind, message)

    def fan_out(self, items: list[Any]) -> None:
        """Run the next stage (a fan-out stage) once per item; its join gets their outputs as `items`."""
        self._fan_out(list(items))

    def save_artifact(self, path: str, content: Any) -> Any:
        """Write the next version of a document for the user."""
        return self._save(path, content)

    def update_state(self, state: BaseModel) -> None:
        """Replace the mission's state (see `state`) once this stage returns."""
        if self._update_state is None:
            raise StageDefinitionError(f"stage '{self.stage}' cannot change the mission state here")
        self._update_state(state)

    def analyze(self, script: str, input: Any = None, tier: Tier = "quick") -> SandboxResult:
        """Run an analysis script (standard-library Python reading INPUT, setting RESULT; see
        missions.core.sandbox) in the sandbox, within its tier's limits. A script that breaks a rule or
        a limit is a result with status "error" and the reason, for the model to fix its script."""
        if self._analyze is None:
            raise StageDefinitionError(f"stage '{self.stage}' runs an analysis but no sandbox is wired")
        return self._analyze(SandboxRequest(script=script, input=input, tier=tier))

    def remember(self, namespace: str, key: str, value: Any) -> None:
        """Keep `value` in the user's long-term memory under (namespace, key): what later missions,
        the user (over the API) and memory triggers see. A capability writes only namespaces named
        after it (`home_assistant`, `home_assistant.insights`), never another's or the user's own."""
        self._memory_for(namespace).put(namespace, key, value)

    def recall(self, namespace: str, key: str | None = None) -> Any:
        """What the user's long-term memory holds under (namespace, key), or None; without a key,
        every value of the namespace by key."""
        return self._memory_for(namespace).get(namespace, key)

    def _memory_for(self, namespace: str) -> Memory:
        if self._memory is None:
            raise StageDefinitionError(f"stage '{self.stage}' uses memory but none is wired")
        return self._memory

    def artifact(self, path: str, version: int | None = None) -> Any:
        """A document this mission saved (its content), the latest version unless one is named."""
        if self._read_artifact is None:
            raise LookupError(f"no artifact store is wired for stage '{self.stage}'")
        return self._read_artifact(path, version)

    def end_reason(self, reason: str, *, failed: bool = False) -> None:
        """Say why the mission ends, other than 'completed' (the final stage only, e.g. 'no_destination');
        a bound or failure that is already ending it keeps its own reason. `failed`: the mission did not do
        what it was for (the outside world refused it, e.g. 'deploy_refused'), so it ends failed, never
        completed, whatever its answer says."""
        if self._end_reason is None:
            raise StageDefinitionError(f"only the final stage names why the mission ends, not '{self.stage}'")
        self._end_reason(reason, failed)

    def repository_root(self) -> str:
        """The directory holding the mission's repository (capabilities with `repository`)."""
        return self._root()


def delegated_output(capability: str, ended: InterruptResponse, output: type[M]) -> M:
    """What a sub-mission's end hands back (missions.service.delegation), as the model the stage asked for."""
    data = ended.data or {}
    status, child = str(data.get("status")), data.get("child")
    if status != "completed":
        raise DelegationFailed(capability, status, str(data.get("reason") or "no reason given"), child)
    try:
        return output.model_validate(data.get("output") or {})
    except ValueError as exc:
        first = str(exc).splitlines()[:3]
        raise DelegationFailed(capability, "gave a result that does not fit", " ".join(first), child) from None


def _optional_model(annotation: Any) -> type[BaseModel] | None:
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    if len(args) == 1 and len(typing.get_args(annotation)) == 2 and isinstance(args[0], type):
        return args[0] if issubclass(args[0], BaseModel) else None
    return None


def _hints(func: Callable[..., Any], where: str) -> dict[str, Any]:
    try:
        return typing.get_type_hints(func)
    except NameError as exc:
        raise StageSignatureError(f"{where}: {exc}") from None


def _where(func: Callable[..., Any]) -> str:
    code = getattr(func, "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code else getattr(func, "__name__", "?")
