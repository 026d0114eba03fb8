"""Reading the synthesized stacks' templates: the names and lookups several stack test modules share."""

from __future__ import annotations

import json
import sys
from typing import Any

from missions.core.capability import registry as registry
from missions.core.specs import TABLES
from tests.infra.conftest import Assembly

ENVIRONMENTS = ("dev", "staging", "prod")


SUITE_PYTHON = f"python{sys.version_info.major}.{sys.version_info.minor}"  # what this test process runs


def _function_service(function: dict) -> str:
    return function["Properties"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"]


def _machines(assembly: Assembly, env: str, kind: str = "STANDARD") -> dict[str, Any]:
    """The stack's state machines of one type: STANDARD (a mission each) or EXPRESS (its segments)."""
    return {
        k: m
        for k, m in assembly.resources(env, "AWS::StepFunctions::StateMachine").items()
        if m["Properties"].get("StateMachineType", "STANDARD") == kind
    }


def _role_statements(assembly: Assembly, env: str, role: str) -> list[dict]:
    """Every statement of the inline policies attached to the role with this logical id."""
    return [
        statement
        for policy in assembly.resources(env, "AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _actions(statement: dict) -> set[str]:
    return set(statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]])


def _resources(statement: dict) -> list:
    return statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]


def _tables_referenced(statement: dict) -> set[str]:
    text = json.dumps(statement["Resource"])
    return {spec.id for spec in TABLES if f'"Storage{spec.id.capitalize()}' in text}


def _stages_by_capability(assembly: Assembly, env: str) -> dict[str, dict[str, dict]]:
    stages: dict[str, dict[str, dict]] = {}
    for logical_id, function in assembly.resources(env, "AWS::Lambda::Function").items():
        capability = function["Properties"]["Environment"]["Variables"].get("MISSIONS_CAPABILITY")
        if capability:
            stages.setdefault(capability, {})[logical_id] = function
    return stages


def _one(assembly: Assembly, env: str, type_: str, prefix: str = "") -> tuple[str, dict]:
    (found,) = [(k, r) for k, r in assembly.resources(env, type_).items() if k.startswith(prefix)]
    return found


def _statements_of(assembly: Assembly, env: str, function: dict) -> list[dict]:
    role = function["Properties"]["Role"]["Fn::GetAtt"][0]
    return [
        statement
        for policy in assembly.resources(env, "AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
