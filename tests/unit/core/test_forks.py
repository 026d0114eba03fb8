"""A fork's edit (missions.core.mission.forks): RFC 7396 merge patches on the goal, context and stage
outputs, checked against the outputs' models, and the stage the fork runs first."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from missions.core.errors import MissionRequestError
from missions.core.mission.envelope import Envelope, Interrupt
from missions.core.mission.forks import ForkEdit, apply_edit, edit_from_assignments, merge_patch

STAGES = ["execute", "present", "complete"]


class Found(BaseModel):
    model_config = ConfigDict(extra="forbid")
    product: str
    options: list[dict[str, Any]]


MODELS = {"execute": Found}


def at_checkpoint() -> Envelope:
    return Envelope(
        capability="shopping",
        raw_input="Find headphones",
        context={"max_options": 3, "preferences": {"trusted_only": True}},
        outputs={"execute": {"product": "Sony", "options": [{"id": "a"}, {"id": "b"}]}},
        next_stage="present",
    )


# RFC 7396, appendix A: target, patch, result
RFC_EXAMPLES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "result"), RFC_EXAMPLES)
def test_merge_patch_gives_the_rfc_results(target, patch, result):
    assert merge_patch(target, patch) == result


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12,
)


@given(json_values, st.dictionaries(st.text(max_size=3), json_values, max_size=4))
def test_a_patch_applied_twice_changes_nothing_more_and_never_changes_its_target(target, patch):
    before = repr(target)
    once = merge_patch(target, patch)
    assert merge_patch(once, patch) == once
    assert repr(target) == before


def test_an_edit_replaces_the_goal_patches_the_context_and_an_output_and_names_the_stage():
    # Given the state at a checkpoint and an edit of everything an edit may change
    envelope = at_checkpoint()
    edit = ForkEdit(
        goal="Find cheaper headphones",
        context={"max_options": 1, "preferences": None},
        outputs={"execute": {"options": [{"id": "b"}]}},
        resume_from="execute",
    )
    # When it applies
    changed = apply_edit(envelope, edit, STAGES, MODELS)
    # Then each part changed as its patch says, and the state it came from did not
    assert changed.raw_input == "Find cheaper headphones"
    assert changed.context == {"max_options": 1}
    assert changed.outputs["execute"] == {"product": "Sony", "options": [{"id": "b"}]}
    assert changed.next_stage == "execute"
    assert envelope.context["max_options"] == 3 and len(envelope.outputs["execute"]["options"]) == 2


def test_naming_a_stage_drops_the_question_the_checkpoint_waited_on():
    envelope = at_checkpoint().model_copy(
        update={"next_stage": "await:choice", "interrupt": Interrupt(kind="choice", question="which?", stage="present")}
    )
    changed = apply_edit(envelope, ForkEdit(resume_from="execute"), STAGES, MODELS)
    assert (changed.next_stage, changed.interrupt) == ("execute", None)


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (ForkEdit(resume_from="checkout"), "no stage 'checkout'"),
        (ForkEdit(outputs={"nope": {"a": 1}}), "no stage 'nope'"),
        (ForkEdit(outputs={"execute": {"options": "none"}}), "output of 'execute' does not fit its model: options"),
        (ForkEdit(outputs={"execute": {"product": None}}), "product: Field required"),
        (ForkEdit(outputs={"execute": {"colour": "red"}}), "colour: Extra inputs are not permitted"),
    ],
)
def test_an_edit_that_names_no_stage_or_breaks_an_output_is_refused_with_why(edit, why):
    with pytest.raises(MissionRequestError, match=why):
        apply_edit(at_checkpoint(), edit, STAGES, MODELS)


def test_a_stage_without_a_model_takes_any_object_and_a_blank_goal_is_refused():
    changed = apply_edit(at_checkpoint(), ForkEdit(outputs={"present": {"asked": True}}), STAGES, MODELS)
    assert changed.outputs["present"] == {"asked": True}
    with pytest.raises(ValueError, match="the goal is empty"):
        ForkEdit(goal="   ")
    assert ForkEdit().empty and not ForkEdit(resume_from="present").empty


def test_set_lines_become_an_edit_and_one_that_fits_no_path_is_named():
    # Given the CLI's --set lines
    edit = edit_from_assignments(
        [
            "goal=Find cheaper ones",
            "context.max_options=1",
            "context.preferences=null",
            "outputs.execute.product=Bose QC45",
            'outputs.execute.options=[{"id": "b"}]',
            "context.note=a=b",
        ]
    )
    # Then each is placed under its path, with JSON values parsed and text kept as written
    assert edit == {
        "goal": "Find cheaper ones",
        "context": {"max_options": 1, "preferences": None, "note": "a=b"},
        "outputs": {"execute": {"product": "Bose QC45", "options": [{"id": "b"}]}},
    }
    assert ForkEdit.model_validate(edit).outputs["execute"]["product"] == "Bose QC45"
    for wrong in ("goal", "state.x=1", "outputs.execute=1", "context=1", "context..x=1"):
        with pytest.raises(ValueError, match=f"'{re.escape(wrong)}'"):
            edit_from_assignments([wrong])
