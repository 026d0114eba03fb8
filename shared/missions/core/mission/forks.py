"""Time travel's edit: what a fork changes in the state it carries on from, before it runs again.

A fork starts a new mission from a checkpoint of another. Its edit may replace the goal, patch the
context and patch stage outputs (each a JSON merge patch, RFC 7396: an object merges key by key, null
removes a key, anything else replaces), and name the stage it runs first. A patched output is checked
against its stage's output model, so the stages after it read what they expect; an edit that names a
stage the pipeline does not have, or breaks an output, is refused with the reason and starts nothing.

The merge patch is RFC 7396's algorithm as the RFC writes it (a dozen lines), so no library is needed.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from missions.core.errors import MissionRequestError
from missions.core.mission.envelope import Envelope, Model

MAX_GOAL = 10_000


class ForkEdit(Model):
    """What a fork changes (every field optional; an empty edit forks the state as it was)."""

    goal: str | None = Field(None, min_length=1, max_length=MAX_GOAL, description="the fork's goal instead")
    context: dict[str, Any] | None = Field(None, description="a JSON merge patch (RFC 7396) on the context")
    outputs: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="stage -> a JSON merge patch on its output, checked against its model"
    )
    resume_from: str | None = Field(
        None, min_length=1, max_length=64, description="the stage the fork runs first (default: the checkpoint's next)"
    )

    @field_validator("goal")
    @classmethod
    def _goal_has_words(cls, goal: str | None) -> str | None:
        if goal is not None and not goal.strip():
            raise ValueError("the goal is empty")
        return goal.strip() if goal is not None else None

    @property
    def empty(self) -> bool:
        return self.goal is None and self.context is None and not self.outputs and self.resume_from is None


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396: `target` with `patch` applied (neither is changed)."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def edit_from_assignments(assignments: Iterable[str]) -> dict[str, Any]:
    """`path=value` lines (the CLI's `--set`) as an edit's fields: `goal=...`, `context.<key>...=...`,
    `outputs.<stage>.<key>...=...`. A value is JSON when it parses as JSON (`3`, `true`, `null` to remove
    a key, `["a"]`), else the text as written. ValueError, with the line, for one that fits no path."""
    edit: dict[str, Any] = {}
    for assignment in assignments:
        path, equals, raw = assignment.partition("=")
        keys = path.strip().split(".")
        if not equals or not all(keys):
            raise ValueError(f"'{assignment}': expected path=value (goal=..., context.KEY=..., outputs.STAGE.KEY=...)")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        root, *rest = keys
        if root == "goal" and not rest:
            edit["goal"] = raw
        elif root == "context" and rest:
            _place(edit.setdefault("context", {}), rest, value)
        elif root == "outputs" and len(rest) >= 2:
            _place(edit.setdefault("outputs", {}), rest, value)
        else:
            raise ValueError(f"'{assignment}': a fork can set goal, context.KEY or outputs.STAGE.KEY, not '{path}'")
    return edit


def _place(patch: dict[str, Any], keys: list[str], value: Any) -> None:
    for key in keys[:-1]:
        inner = patch.get(key)
        patch = patch.setdefault(key, {}) if isinstance(inner, dict) or inner is None else {}
    patch[keys[-1]] = value


def apply_edit(
    envelope: Envelope,
    edit: ForkEdit,
    stages: Collection[str],
    output_models: Mapping[str, type[BaseModel]],
) -> Envelope:
    """The envelope a fork starts with (MissionRequestError, nothing changed, when the edit cannot apply).

    `stages`: the pipeline's stage names; `output_models`: stage -> the model its output must fit (a
    stage without one takes any object)."""
    unknown = sorted({*edit.outputs, *([edit.resume_from] if edit.resume_from else [])} - set(stages))
    if unknown:
        raise MissionRequestError(
            f"no stage {', '.join(map(repr, unknown))} in this pipeline; stages: {', '.join(stages)}"
        )
    changed = envelope.model_copy(deep=True)
    if edit.goal is not None:
        changed.raw_input = edit.goal
    if edit.context is not None:
        context = merge_patch(changed.context, edit.context)
        changed.context = context if isinstance(context, dict) else {}
    for stage, patch in edit.outputs.items():
        output = merge_patch(changed.output(stage), patch)
        model = output_models.get(stage)
        if model is not None:
            try:
                output = model.model_validate(output).model_dump(mode="json")
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or 'output'}: {e['msg']}" for e in exc.errors()[:5]
                )
                raise MissionRequestError(
                    f"the edited output of '{stage}' does not fit its model: {problems}"
                ) from None
        changed.outputs[stage] = output
    if edit.resume_from is not None:
        changed.next_stage = edit.resume_from
        # a question the checkpoint was waiting on belongs to where it stood, not to the stage named
        changed.interrupt, changed.resume, changed.replay = None, None, None
    return changed


__all__ = ["ForkEdit", "apply_edit", "edit_from_assignments", "merge_patch"]
