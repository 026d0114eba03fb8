"""moto's EventBridge, patched: rules deliver to Lambda and Step Functions targets, and a custom bus
can be referred to in a template.

2. Stock moto raises NotImplementedError for Lambda and Step Functions targets; `Rule.send_to_targets`
   delivers those itself and leaves the rest to moto. Schedule-only rules are skipped: schedules never
   fire in moto, the dev server's clock drives them.
4. (its EventBridge half) CloudFormation's `Ref` of an AWS::Events::EventBus must be its name; moto's
   EventBus has no `physical_resource_id`, so a rule on a custom bus fails to deploy. It gets one.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from missions.local.moto import functions
from missions.local.moto._mechanism import Patch
from missions.local.moto.awslambda import configured_timeout


def _send_to_targets(self: Any, original_event: Any, transform_input: bool = True) -> None:
    if self.scheduled_expression and not self.event_pattern.get_pattern():
        return  # schedules never fire in moto; the dev server's clock drives them
    if not self.event_pattern.matches_event(original_event):
        return
    others = []
    for target in self.targets:
        arn = target["Arn"]
        if ":lambda:" in arn:
            _deliver_lambda(arn, target, original_event)
        elif ":states:" in arn:
            _deliver_state_machine(arn, target, original_event)
        else:
            others.append(target)
    if others:
        saved = self.targets
        self.targets = others
        try:
            SEND_TO_TARGETS.original(self, original_event, transform_input)
        finally:
            self.targets = saved


def _target_input(target: dict[str, Any], event: Any) -> Any:
    if "Input" in target:
        return json.loads(target["Input"])
    return event


def _deliver_lambda(arn: str, target: dict[str, Any], event: Any) -> None:
    name = arn.split(":function:")[-1].split(":")[0]
    handler = functions.handler(name)
    if handler is None:
        raise LookupError(f"EventBridge target {arn} has no in-process handler")
    context = functions.LocalContext(
        function_name=name, aws_request_id=str(uuid.uuid4()), timeout_seconds=configured_timeout(arn)
    )
    functions.call(handler, _target_input(target, event), context)


def _deliver_state_machine(arn: str, target: dict[str, Any], event: Any) -> None:
    import boto3

    region = arn.split(":")[3]
    boto3.client("stepfunctions", region_name=region).start_execution(
        stateMachineArn=arn, name=str(uuid.uuid4()), input=json.dumps(_target_input(target, event))
    )


SEND_TO_TARGETS = Patch(
    "moto.events.models:Rule",
    "send_to_targets",
    _send_to_targets,
    "2: moto raises NotImplementedError for Lambda and Step Functions targets; they are delivered here",
)
BUS_REF = Patch(
    "moto.events.models:EventBus",
    "physical_resource_id",
    property(lambda bus: bus.name),
    "4: a template's Ref of an EventBus is its name; moto's EventBus has no physical_resource_id",
    adds=True,
)
PATCHES = (SEND_TO_TARGETS, BUS_REF)
