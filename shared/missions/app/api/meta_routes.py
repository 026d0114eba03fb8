"""What the service offers: capabilities, which one fits a goal, how each is doing, and this contract."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError

from missions.app.api.edge import app, current_user, responses, runtime
from missions.app.api.models.capabilities import CapabilityCost, CapabilityGraph, CapabilityList
from missions.app.api.models.missions import ClassificationView, ClassifyRequest
from missions.core.cost.prediction import predict
from missions.core.errors import MissionRequestError
from missions.core.pipeline.compiler import compile_mission
from missions.core.pipeline.graph import mission_graph


@app.get("/capabilities", summary="Installed mission types", responses=responses((200, CapabilityList, "all")))
def list_capabilities() -> dict[str, Any]:
    current_user()
    return {"capabilities": [c.describe() for c in runtime().capabilities.load_all()]}


@app.get(
    "/capabilities/<name>/graph",
    summary="A capability's compiled state machine, to draw",
    responses=responses((200, CapabilityGraph, "its states and transitions"), 404),
)
def capability_graph(name: str) -> dict[str, Any]:
    current_user()
    if name not in runtime().capabilities.available():
        raise NotFoundError(f"no capability {name}")
    machines = compile_mission(runtime().capabilities.load(name).pipeline)
    return {"capability": name, **mission_graph(machines)}


@app.get(
    "/capabilities/<name>/cost",
    summary="What one mission of a capability will cost in AWS infrastructure, predicted",
    responses=responses((200, CapabilityCost, "the prediction, its range and its assumptions"), 404),
)
def capability_cost(name: str) -> dict[str, Any]:
    current_user()
    if name not in runtime().capabilities.available():
        raise NotFoundError(f"no capability {name}")
    return predict(runtime().capabilities.load(name).pipeline).as_dict()


@app.post(
    "/classify",
    summary="Which capability a goal would get, and how complex it is",
    responses=responses((200, ClassificationView, "the classification"), 503, body=True),
)
def classify(body: ClassifyRequest) -> dict[str, Any]:
    """Which capability would take this goal, and how complex it is (1 simple, 2 coordinated, 3 complex)."""
    current_user()
    try:
        capability: str | None = runtime().service.choose_capability(body.goal, None)
    except MissionRequestError:
        capability = None
    classification = runtime().service.classify_goal(body.goal)
    return {"capability": capability, **classification.model_dump(mode="json")}


@app.get(
    "/openapi.json", summary="This contract", security=[], responses={200: {"description": "the OpenAPI document"}}
)
def openapi() -> Response[str]:
    return Response(200, "application/json", body=app.get_openapi_json_schema())
