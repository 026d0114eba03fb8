"""moto's CloudFormation, patched: what it lacks for the stack as deployed, and what it leaves to a
Docker host.

12. Nested stacks (each capability is one): moto creates an AWS::CloudFormation::Stack from its
   TemplateURL, but a parent's `Fn::GetAtt [Nested, Outputs.X]` fails (its Stack model has no
   `get_cfn_attribute`). It answers from the nested stack's outputs, as CloudFormation does.
13. Function URLs (the stream function's): moto's Lambda has the API (CreateFunctionUrlConfig) but its
   CloudFormation has no AWS::Lambda::Url, and a stack output naming one's `FunctionUrl` fails the
   whole deploy. It is created through that API, and answers `FunctionUrl` and `FunctionArn`.
15. Custom resources: moto invokes the function a `Custom::` resource names (in a thread) with a
   ResponseURL on the Docker host where a moto server would listen, and the stack stays
   CREATE_IN_PROGRESS until a reply arrives there. `CloudFormationReplies` is the DeploymentReplies
   port that hands an in-process function's reply to moto's CloudFormation backend, as its server
   would; a FAILED reply fails the stack with the function's reason, as CloudFormation does. (A
   function CloudFormation invokes while it creates the stack exists before the harness could register
   its handler: `functions.resolve_with` names who builds handlers for functions not registered yet.)
16. Schedule groups (users' schedules live in one): moto's CloudFormation has no
   AWS::Scheduler::ScheduleGroup, so the group was never made (CreateSchedule in it failed) and the
   scheduler role's trust condition, which reads the group's Arn, failed the whole deploy. It is created
   through moto's Scheduler API, and answers `Arn`.

Each is applied when moto's CloudFormation is first imported, not at install: its parser imports every
service's models (EC2's, ECS's, API Gateway's with its OpenAPI validator), about 0.6 s of each process
that starts the emulation, and only a deploy uses it.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from missions.local.moto._mechanism import Patch

_log = logging.getLogger(__name__)


class CloudFormationReplies:
    """The DeploymentReplies port for a stack moto's CloudFormation creates (patch 15)."""

    def send(self, url: str, reply: dict[str, Any]) -> None:
        from moto.cloudformation.models import cloudformation_backends

        assert "/cfnresponse?stack=" in url, f"not a ResponseURL moto made: {url}"
        _, _, _, region, account, _ = str(reply["StackId"]).split(":", 5)
        stack = cloudformation_backends[account][region].get_stack(reply["StackId"])
        logical_id = reply["LogicalResourceId"]
        # moto asks the function from inside the resource's creation, and keeps the resource only once that
        # returns: a reply before then would make moto's readiness check create (and ask for) it again
        deadline = time.monotonic() + 30
        while logical_id not in stack.resource_map._parsed_resources and time.monotonic() < deadline:
            time.sleep(0.01)
        if reply["Status"] == "SUCCESS":
            stack.get_custom_resource(logical_id).set_data(reply.get("Data") or {})
            stack.verify_readiness()
        else:
            stack.status = "CREATE_FAILED"
            stack._add_stack_event("CREATE_FAILED", resource_status_reason=reply.get("Reason", ""))


# -- patch 12: a nested stack's outputs --------------------------------------------------------------------


def _nested_stack_output(self: Any, attribute_name: str) -> Any:
    """`Fn::GetAtt [Nested, Outputs.X]`: the nested stack's output X."""
    from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

    name = attribute_name.removeprefix("Outputs.")
    output = self.output_map.get(name) if attribute_name.startswith("Outputs.") else None
    if output is None:
        raise UnformattedGetAttTemplateException()
    return output.value


# -- patches 13 and 16: resource types moto's CloudFormation lacks ---------------------------------------------


class _CfnModel:
    """What moto's CloudFormation asks of a resource the emulation makes itself (patches 13 and 16): its
    type, the attributes a template may read (`ATTRIBUTES`, answered from `attributes`), and creation done."""

    TYPE = ""
    NAME_PROPERTY = ""
    ATTRIBUTES: tuple[str, ...] = ()

    def __init__(self, physical_id: str, **attributes: str) -> None:
        self._physical_id, self.attributes = physical_id, attributes

    @classmethod
    def cloudformation_type(cls) -> str:
        return cls.TYPE

    @classmethod
    def cloudformation_name_type(cls) -> str:
        return cls.NAME_PROPERTY

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr in cls.ATTRIBUTES

    @property
    def physical_resource_id(self) -> str:
        return self._physical_id

    def is_created(self) -> bool:
        return True

    def get_cfn_attribute(self, attribute_name: str) -> str:
        from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

        if attribute_name in self.ATTRIBUTES:
            return self.attributes[attribute_name]
        raise UnformattedGetAttTemplateException()


class _ScheduleGroup(_CfnModel):
    """An AWS::Scheduler::ScheduleGroup as CloudFormation makes it: CreateScheduleGroup (patch 16)."""

    TYPE, NAME_PROPERTY, ATTRIBUTES = "AWS::Scheduler::ScheduleGroup", "Name", ("Arn",)

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kwargs: Any
    ) -> _ScheduleGroup:
        from moto.scheduler.models import scheduler_backends

        properties = cloudformation_json.get("Properties") or {}
        name = properties.get("Name") or resource_name
        group = scheduler_backends[account_id][region_name].create_schedule_group(name, properties.get("Tags") or [])
        return cls(group.name, Arn=group.arn)


class _FunctionUrl(_CfnModel):
    """An AWS::Lambda::Url as CloudFormation makes it: CreateFunctionUrlConfig on its target function."""

    TYPE, ATTRIBUTES = "AWS::Lambda::Url", ("FunctionUrl", "FunctionArn")

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kwargs: Any
    ) -> _FunctionUrl:
        from moto.awslambda.models import lambda_backends

        properties = dict(cloudformation_json["Properties"])
        target = properties.pop("TargetFunctionArn")
        config = lambda_backends[account_id][region_name].create_function_url_config(target, properties)
        arn = config.function.function_arn
        return cls(arn, FunctionUrl=config.url, FunctionArn=arn)

    @property
    def function_arn(self) -> str:
        return self.attributes["FunctionArn"]

    def delete(self, account_id: str, region_name: str) -> None:
        from moto.awslambda.exceptions import UnknownFunctionException
        from moto.awslambda.models import lambda_backends

        try:
            lambda_backends[account_id][region_name].delete_function_url_config(self.function_arn)
        except UnknownFunctionException:  # the function went first (the stack deletes both): so did its URL
            _log.debug("no function left for the URL of %s", self.function_arn)


_RESOURCE_TYPES: dict[str, type[_CfnModel]] = {model.TYPE: model for model in (_FunctionUrl, _ScheduleGroup)}


def _resource_class_from_type(resource_type: str) -> Any:
    return _RESOURCE_TYPES.get(resource_type) or RESOURCE_TYPES.original(resource_type)


NESTED_OUTPUTS = Patch(
    "moto.cloudformation.models:Stack",
    "get_cfn_attribute",
    _nested_stack_output,
    "12: moto cannot read a nested stack's outputs (Fn::GetAtt [Nested, Outputs.X])",
    adds=True,
    on_import=True,
)
RESOURCE_TYPES = Patch(
    "moto.cloudformation.parsing",
    "resource_class_from_type",
    _resource_class_from_type,
    "13, 16: moto's CloudFormation has no AWS::Lambda::Url nor AWS::Scheduler::ScheduleGroup",
    on_import=True,
)
PATCHES = (NESTED_OUTPUTS, RESOURCE_TYPES)
