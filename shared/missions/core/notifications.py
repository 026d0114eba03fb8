"""What a user is told when a mission needs them or finishes, when they opted in (by email in AWS).

A notice carries its user, so one topic serves everyone: each user's subscription filters on it.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from missions.core.mission.envelope import Model

EMAIL = re.compile(r"^[^@\s]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9-]{1,63})+$")
NoticeKind = Literal["needs_you", "finished"]


class Notice(Model):
    user_id: str
    mission_id: str
    kind: NoticeKind
    subject: str = Field(max_length=100)  # SNS email subjects are at most 100 characters
    text: str


def valid_email(address: str) -> bool:
    return len(address) <= 254 and EMAIL.fullmatch(address) is not None


def needs_you(user_id: str, mission_id: str, goal: str, question: str) -> Notice:
    return Notice(
        user_id=user_id,
        mission_id=mission_id,
        kind="needs_you",
        subject=f"A mission needs you: {goal}"[:100],
        text=f'Your mission "{goal}" ({mission_id}) asks:\n\n{question}\n\nAnswer it on your missions page.',
    )


def finished(user_id: str, mission_id: str, goal: str, status: str, summary: str | None) -> Notice:
    return Notice(
        user_id=user_id,
        mission_id=mission_id,
        kind="finished",
        subject=f"Mission {status}: {goal}"[:100],
        text=f'Your mission "{goal}" ({mission_id}) {status}.\n\n{(summary or "").strip()[:2000]}',
    )
