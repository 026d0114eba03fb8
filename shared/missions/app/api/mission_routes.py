"""Missions: start, list, read, follow, fork, answer, pause, resume, steer, cancel and rate them."""

from __future__ import annotations

import base64
import json
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import ValidationError

from missions.app.api.edge import app, current_user, error, owned_mission, responses, runtime
from missions.app.api.idempotency import once
from missions.app.api.models.interrupts import AnswerAccepted, AnswerBody, Inbox
from missions.app.api.models.missions import (
    ArtifactList,
    ArtifactView,
    Cancelled,
    CheckpointList,
    CheckpointState,
    EventsPage,
    FeedbackBody,
    FeedbackTaken,
    ForkAccepted,
    ForkRequest,
    MissionAccepted,
    MissionCreate,
    MissionList,
    MissionView,
    NoteBody,
    NoteTaken,
    Pausing,
    Resumed,
)
from missions.app.cursors import BadCursor, decode_position, encode_position
from missions.core.errors import MissionRequestError, NotFound
from missions.core.evaluation import Evaluation
from missions.core.mission.artifacts import ARTIFACT_PATH_PATTERN
from missions.core.mission.envelope import InterruptResponse
from missions.core.mission.forks import ForkEdit
from missions.core.mission.requests import MissionRequest, one_line
from missions.core.mission.status import TERMINAL, MissionStatus
from missions.core.triggers.declared import TriggerSource
from missions.ports.missions import MissionRecord, MissionSummary, lifecycle_of, running_stage
from missions.service.checkpoints import records_of, state_at
from missions.service.interrupts import NotAnswerableYet, waiting_questions

_MISSION = "/missions/<mission_id>"
# to start, or to resume after an answer or the user's resume
_MAY_WAIT_IN_LINE = (MissionStatus.QUEUED, MissionStatus.INTERRUPTED, MissionStatus.PAUSED)


@app.post(
    "/missions",
    summary="Start a mission",
    responses=responses((202, MissionAccepted, "accepted: started now or queued"), 409, 429, 503, body=True),
)
def create_mission(body: MissionCreate) -> Response[dict[str, Any]]:
    """Start a mission from a goal; the capability is named or chosen by the goal. Send an Idempotency-Key
    to make retries safe (see the API description)."""
    user = current_user()

    def create() -> tuple[int, dict[str, Any]]:
        active = runtime()
        capability = active.service.choose_capability(body.goal, body.capability)
        request = MissionRequest.parse(
            capability=capability,
            goal=body.goal,
            user_id=user,
            context=body.context,
            priority=body.priority,
            deadline=body.deadline.isoformat() if body.deadline else None,
            bounds={"max_cost_usd": body.max_cost_usd} if body.max_cost_usd is not None else {},
            trigger=TriggerSource.API,
            conversation_id=body.conversation_id,
            model=body.model,
            over_budget=body.over_budget,
            concurrency_key=body.concurrency_key,
            multitask_strategy=body.multitask_strategy,
        )
        active.service.remember_user(user)  # before the mission: nothing half-made if this fails
        result = active.launcher.submit(request)  # checks everything (a repository, say) before writing
        accepted = {"mission_id": result.mission_id, "status": result.status, "capability": capability}
        return 202, accepted | ({"held": result.held} if result.held else {})

    return once("create-mission", user, body.model_dump(mode="json"), create, runtime().idempotency)


@app.get("/missions", summary="List your missions", responses=responses((200, MissionList, "newest first"), 422))
def list_missions(
    status: Annotated[str | None, Query(max_length=32)] = None,
    capability: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
) -> dict[str, Any]:
    user = current_user()
    records = runtime().missions.list_for_user(user, limit=1000)
    records = [
        r for r in records if (not status or r.status == status) and (not capability or r.capability == capability)
    ]
    start = _decode_cursor(cursor)
    page = [runtime().progress.summary(r) for r in records[start : start + limit]]
    next_cursor = _encode_cursor(start + limit) if start + limit < len(records) else None
    return {"missions": [_summary(r) for r in page], "cursor": next_cursor}


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode()


def _decode_cursor(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        offset = json.loads(base64.urlsafe_b64decode(cursor.encode()))["o"]
        if isinstance(offset, int) and not isinstance(offset, bool) and offset >= 0:
            return offset
    except (ValueError, KeyError, TypeError):
        pass
    raise RequestValidationError([{"loc": ("query", "cursor"), "type": "value_error", "msg": "invalid cursor"}])


def _first_stage(capability: str) -> str | None:
    try:
        return runtime().capabilities.load(capability).pipeline.start
    except LookupError:  # a capability no longer installed: its missions show where they were
        return None


def _summary(record: MissionRecord | MissionSummary) -> dict[str, Any]:
    return {
        "mission_id": record.mission_id,
        "capability": record.capability,
        "goal": record.goal,
        "status": record.status,
        "lifecycle": lifecycle_of(record),
        "stage": record.stage,
        "running_stage": running_stage(record, _first_stage(record.capability)),
        "priority": record.priority,
        "trigger": record.trigger,
        "created_at": record.created_at,
        "terminal_reason": record.terminal_reason,
    }


@app.get(_MISSION, summary="Read a mission", responses=responses((200, MissionView, "the mission"), 404))
def get_mission(mission_id: str) -> dict[str, Any]:
    """Status, lifecycle, the question waiting for you (once it can be answered), why it is queued, the
    result, counters and cost."""
    user = current_user()
    record = runtime().progress.current(owned_mission(mission_id, user))
    counters = record.counters or {}
    questions = _answerable_questions(record)
    return {
        **_summary(record),
        "updated_at": record.updated_at,
        "completed_at": record.completed_at,
        "archived_at": record.archived_at,
        "pending_interrupt": questions[0] if questions else None,
        "pending_interrupts": questions,
        "queue": runtime().launcher.queue_place(record) if record.status in _MAY_WAIT_IN_LINE else None,
        "result": record.result,
        "counters": counters,
        "cost_usd": counters.get("cost_usd", 0.0),
        "feedback": record.feedback,
        "paused_at": record.paused_at,
        "notes": record.notes,
        "forked_from": record.forked_from,
        "parent": record.parent,
        "lineage": record.lineage,
        "children": record.children,
    }


@app.get("/inbox", summary="Every question waiting for you", responses=responses((200, Inbox, "newest first")))
def inbox() -> dict[str, Any]:
    """The questions your missions wait on, across missions (each answerable now; a mission whose parallel
    branches asked has an item per question), and your missions held back: by your daily budget, or behind
    their conversation's (or concurrency key's) last mission."""
    return {"items": _questions(current_user()), "held": _held(current_user())}


def _held(user: str) -> list[dict[str, Any]]:
    launcher, held = runtime().launcher, []
    for entry in launcher.dispatcher.held(user):
        try:
            record = runtime().missions.get(entry.mission_id)
        except NotFound:  # recorded a moment from now, or erased
            continue
        place = launcher.queue_place(record)
        fields = {"capability": record.capability, "goal": record.goal, "created_at": record.created_at}
        why = {"held": entry.held, "reason": place["reason"] if place else "held"}
        held.append({"mission_id": record.mission_id, **fields, **why})
    return held


def _questions(user: str) -> list[dict[str, Any]]:
    items = []
    for record in runtime().missions.list_for_user(user, limit=1000):
        if record.status != MissionStatus.INTERRUPTED:
            continue
        for question in _answerable_questions(record):
            items.append(
                {
                    "mission_id": record.mission_id,
                    "capability": record.capability,
                    "goal": record.goal,
                    "created_at": record.created_at,
                    "question": question,
                }
            )
    return items


def _answerable_questions(record: MissionRecord | MissionSummary) -> list[dict[str, Any]]:
    return [
        {
            "interrupt_id": interrupt.interrupt_id,
            "kind": interrupt.kind.value,
            "question": interrupt.question,
            "options": interrupt.options,
            "data": interrupt.data,  # what the user is asked to judge (a draft, the options' details)
            "stage": interrupt.stage,
        }
        for interrupt in waiting_questions(runtime().interrupts, record)
    ]


@app.get(
    f"{_MISSION}/events",
    summary="Follow a mission's events",
    responses=responses((200, EventsPage, "events in order"), 404, 422),
)
def mission_events(
    mission_id: str,
    after: Annotated[str | None, Query(max_length=300)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> dict[str, Any]:
    """Events in order; `cursor` (opaque, URL-safe) goes back as `after` for the next page."""
    owned_mission(mission_id, current_user())
    position = _decode_position(after) if after else None
    events, last = runtime().events.read(mission_id, after=position, limit=limit)
    cursor = encode_position(last) if last else after
    return {"events": [e.model_dump(mode="json") for e in events], "cursor": cursor}


@app.get(
    f"{_MISSION}/evaluation",
    summary="How a mission behaved (trace scorers)",
    responses=responses((200, Evaluation, "its scores, from its timeline"), 404),
)
def mission_evaluation(mission_id: str) -> dict[str, Any]:
    """Response latency, tool-use safety, delegation depth and tool calls, scored from its events."""
    record = owned_mission(mission_id, current_user())
    return runtime().evaluator.mission(record).model_dump(mode="json")


def _decode_position(cursor: str) -> str:
    try:
        return decode_position(cursor)
    except BadCursor:
        raise RequestValidationError(
            [{"loc": ("query", "after"), "type": "value_error", "msg": "invalid cursor"}]
        ) from None


@app.get(
    f"{_MISSION}/checkpoints",
    summary="A mission's checkpoints (time travel)",
    responses=responses((200, CheckpointList, "oldest first"), 404),
)
def mission_checkpoints(mission_id: str) -> dict[str, Any]:
    """Each checkpoint (any of them can be forked) with the stage runs it records: the mission's history,
    read from its checkpoints (the envelope does not carry it)."""
    owned_mission(mission_id, current_user())
    checkpoints = runtime().checkpoints.list(mission_id)
    return {
        "checkpoints": [
            {
                "checkpoint_id": c.checkpoint_id,
                "parent_id": c.parent_id,
                "stage": c.stage,
                "created_at": c.created_at,
                "stages": [r.model_dump(mode="json") for r in records_of(c)],
            }
            for c in checkpoints
        ]
    }


@app.get(
    f"{_MISSION}/checkpoints/<checkpoint_id>",
    summary="The mission's state at one checkpoint (time travel)",
    responses=responses((200, CheckpointState, "its envelope, with references to what was offloaded"), 404),
)
def mission_checkpoint(mission_id: str, checkpoint_id: str) -> dict[str, Any]:
    """What the mission held after that checkpoint's stage: what a fork from it starts with."""
    owned_mission(mission_id, current_user())
    checkpoints = runtime().checkpoints
    try:
        checkpoint = checkpoints.get(mission_id, checkpoint_id)
        state = state_at(checkpoints, mission_id, checkpoint)
    except NotFound:
        raise NotFoundError(f"no checkpoint {checkpoint_id} in mission {mission_id}") from None
    return {
        "checkpoint_id": checkpoint.checkpoint_id,
        "parent_id": checkpoint.parent_id,
        "stage": checkpoint.stage,
        "created_at": checkpoint.created_at,
        "stages": [r.model_dump(mode="json") for r in records_of(checkpoint)],
        "next_stage": state.get("next_stage"),
        "state": state,
    }


@app.get(
    f"{_MISSION}/artifacts",
    summary="A mission's documents",
    responses=responses((200, ArtifactList, "every version of every document"), 404),
)
def mission_artifacts(mission_id: str) -> dict[str, Any]:
    """Every version of every document the mission wrote (plan, research, drafts/itinerary_vN, final)."""
    owned_mission(mission_id, current_user())
    return {
        "artifacts": [
            {"name": a.name, "path": a.path, "version": a.version, "stage": a.stage, "created_at": a.created_at}
            for a in runtime().artifacts.list(mission_id)
        ]
    }


@app.get(
    f"{_MISSION}/artifact",
    summary="One document",
    responses=responses((200, ArtifactView, "its content"), 404, 422),
)
def mission_artifact(
    mission_id: str,
    path: Annotated[str, Query(min_length=1, max_length=200, pattern=ARTIFACT_PATH_PATTERN)],
    version: Annotated[int | None, Query(ge=1, le=100_000)] = None,
) -> dict[str, Any]:
    """One artifact's content: the latest version of `path`, or `version`."""
    owned_mission(mission_id, current_user())
    try:
        artifact = runtime().artifacts.get(mission_id, path, version)
    except NotFound:
        which = f"{path} v{version}" if version else path
        raise NotFoundError(f"mission {mission_id} has no artifact {which}") from None
    return {
        "name": artifact.name,
        "path": artifact.path,
        "version": artifact.version,
        "stage": artifact.stage,
        "created_at": artifact.created_at,
        "content": artifact.content,
    }


@app.post(
    f"{_MISSION}/fork",
    summary="Carry on from a checkpoint, as a new mission",
    responses=responses((202, ForkAccepted, "the new mission: started or queued"), 404, 409, 503, body=True),
)
def fork_mission(mission_id: str, body: ForkRequest) -> Response[dict[str, Any]]:
    """The new mission starts from the state at the checkpoint, changed by the edit if the body gives one:
    the goal replaced, the context and stage outputs patched (JSON merge patches; an output must still
    fit its stage's model), and the stage to run first. Takes an Idempotency-Key, like POST /missions."""
    user = current_user()
    owned_mission(mission_id, user)

    def fork() -> tuple[int, dict[str, Any]]:
        try:
            try:
                edit = ForkEdit(
                    goal=body.goal, context=body.context, outputs=body.outputs, resume_from=body.resume_from
                )
            except ValidationError as exc:
                raise MissionRequestError(one_line(exc)) from None
            result = runtime().launcher.fork(mission_id, body.checkpoint_id, user, edit)
        except NotFound:
            raise NotFoundError(f"no checkpoint {body.checkpoint_id} in mission {mission_id}") from None
        return 202, {
            "mission_id": result.mission_id,
            "status": result.status,  # started, or queued behind the user's running missions
            "forked_from": mission_id,
            "checkpoint_id": body.checkpoint_id,
        }

    return once("fork-mission", user, {"from": mission_id, **body.model_dump()}, fork, runtime().idempotency)


@app.post(
    f"{_MISSION}/interrupts/<interrupt_id>",
    summary="Answer the mission's question",
    responses=responses((200, AnswerAccepted, "answered"), 404, 409, 503, body=True),
)
def answer(mission_id: str, interrupt_id: str, body: AnswerBody) -> dict[str, Any] | Response[dict[str, Any]]:
    """Once per question, in any order when several wait (the last one resumes the mission): a second
    answer is 409; an answer for a question not yet shown is 409 with
    Retry-After (it becomes answerable in a moment); one that does not fit the question is 422."""
    record = owned_mission(mission_id, current_user())
    try:
        answered, now = runtime().interrupt_service.answer(
            mission_id, interrupt_id, InterruptResponse(**body.model_dump()), record
        )
    except NotAnswerableYet as exc:  # its token is stored, the mission not yet marked waiting
        return error(409, str(exc), headers={"Retry-After": "1"})
    except NotFound:
        if runtime().progress.current(record).asking == interrupt_id:  # asked, its token not stored yet
            return error(409, f"question {interrupt_id} is not answerable yet", headers={"Retry-After": "1"})
        raise NotFoundError(f"no interrupt {interrupt_id} in mission {mission_id}") from None
    status = "waiting" if now is None else "answered" if now else "queued"
    return {"interrupt_id": answered.interrupt_id, "status": status}


@app.post(
    f"{_MISSION}/cancel",
    summary="Cancel a mission",
    responses=responses((200, Cancelled, "cancelled"), 404, 409),
)
def cancel(mission_id: str) -> dict[str, Any] | Response[dict[str, Any]]:
    """Works while it is queued, running, waiting for you or paused; a mission that ended is 409."""
    record = owned_mission(mission_id, current_user())
    if record.status in TERMINAL or record.status == MissionStatus.CANCELLING:
        return error(409, f"mission {mission_id} already {record.status}")
    runtime().control.cancel(record)  # a ConflictError (409) when it ended while the cancel was on its way
    return {"mission_id": mission_id, "status": "cancelled"}


@app.post(
    f"{_MISSION}/pause",
    summary="Pause a running mission",
    responses=responses((202, Pausing, "pausing"), 404, 409),
)
def pause(mission_id: str) -> Response[dict[str, Any]]:
    """Its stage in flight ends and checkpoints; then it waits, at no compute cost and holding none of your
    running slots, until you resume it (or cancel it). Only a running mission pauses (409 otherwise)."""
    record = owned_mission(mission_id, current_user())
    runtime().control.pause(record)
    return Response(202, "application/json", {"mission_id": mission_id, "status": "pausing"})


@app.post(
    f"{_MISSION}/resume",
    summary="Resume a paused mission",
    responses=responses((200, Resumed, "resumed, or queued for a running slot"), 404, 409, 503),
)
def resume(mission_id: str) -> dict[str, Any]:
    """It goes on from its checkpoint with its whole context and the notes you sent meanwhile. Only a
    paused mission resumes (409 otherwise, also while it is still pausing)."""
    record = owned_mission(mission_id, current_user())
    now = runtime().control.resume(record)
    return {"mission_id": mission_id, "status": "running" if now else "queued"}


@app.post(
    f"{_MISSION}/notes",
    summary="Steer a mission: send it a note",
    responses=responses((202, NoteTaken, "noted"), 404, 409, body=True),
)
def note(mission_id: str, body: NoteBody) -> Response[dict[str, Any]]:
    """While it is queued, running, waiting or paused: the next stage that starts receives the note in its
    context (and a conversation's turn in its working memory); its timeline records it. A mission that
    ended is 409, as is one with 20 notes already."""
    record = owned_mission(mission_id, current_user())
    taken = runtime().control.note(record, body.text)
    return Response(202, "application/json", {"mission_id": mission_id, "note_id": taken.note_id, "status": "noted"})


@app.post(
    f"{_MISSION}/feedback",
    summary="Rate a mission that ended",
    responses=responses((200, FeedbackTaken, "taken"), 404, 409, 503, body=True),
)
def feedback(mission_id: str, body: FeedbackBody) -> dict[str, Any]:
    """Once per mission, after it ended (409 before, and for a second one)."""
    user = current_user()
    record = owned_mission(mission_id, user)
    outcome = runtime().service.give_feedback(record, user, body.model_dump(exclude_none=True))
    return {
        "mission_id": mission_id,
        "preferences_written": outcome.preferences_written,
        "complaint": outcome.complaint,
    }
