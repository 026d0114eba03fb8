"""The analysis-script sandbox: one Lambda function per tier, with no way out.

Each function runs a script in a child process with the sandbox's limits and audit hook
(functions/sandbox, missions.adapters.sandbox_local). Around that, AWS adds:
- no network path: the functions live in a VPC of isolated subnets (no internet gateway, no NAT, no
  VPC endpoint, no route out of the VPC) with DNS turned off (the Amazon resolver answers no one, so
  names cannot leak through lookups either), and their security group has no egress rule at all;
- a role that may write its own log group and manage the network interfaces Lambda attaches to the
  VPC (Lambda itself uses those actions when it creates the function's interfaces; the credentials
  never reach a script, whose environment is scrubbed, and could reach no AWS endpoint anyway);
  no X-Ray (it would need a network path), no data store, secret, bus or function;
- read-only code (a Lambda package and layer are read-only; only /tmp is writable, and each run's
  directory there is removed after it) and reserved concurrency per tier, which bounds the cost of a
  flood of scripts and keeps them from starving the mission functions.

Sizing: a tier's limits are the script's (missions.ports.sandbox.TIERS). The function holding it needs
more: its own Python (about 40 MB) beside the child's address space, and time to start the child and
report after it, so each function has FUNCTION_HEADROOM_MB more memory and FUNCTION_HEADROOM_SECONDS more
time than its tier (missions.ports.sandbox); the handler gives the child at most what remains.

Who may invoke them: nothing by default. `grant_invoke(role)` is the helper for the stages of a
capability that runs analysis scripts (a data-science stage); no capability installed today does.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.components.functions import FunctionFactory, FunctionNetwork
from infra.components.nag import acknowledge, rendered
from infra.config import EnvironmentConfig
from missions.core.sandbox import FUNCTION_HEADROOM_MB, FUNCTION_HEADROOM_SECONDS, TIERS, Tier
from missions.core.settings import environment_of
from missions.core.specs import SANDBOX_FUNCTION

VPC_CIDR = "10.213.0.0/24"  # addresses for the functions' network interfaces only; never routed anywhere
# Lambda attaches a VPC function through network interfaces it makes with the function's role: these
# take no resource ('*' only) ...
ENI_DESCRIBE = ("ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets")
# ... and these are limited to the account's EC2 resources in the stack's region (Lambda's guide: an
# interface's id is not known in advance, and DeleteNetworkInterface must cover every one Lambda may make)
ENI_MANAGE = (
    "ec2:AssignPrivateIpAddresses",
    "ec2:CreateNetworkInterface",
    "ec2:DeleteNetworkInterface",
    "ec2:UnassignPrivateIpAddresses",
)
ENI_RESOURCES = "arn:{partition}:ec2:{region}:{account}:*/*"


def function_memory_mb(tier: Tier) -> int:
    return TIERS[tier].memory_mb + FUNCTION_HEADROOM_MB


def function_timeout_seconds(tier: Tier) -> int:
    return int(TIERS[tier].timeout_seconds) + FUNCTION_HEADROOM_SECONDS


class Sandbox(Construct):
    """`functions[tier]` run that tier's scripts; `grant_invoke` lets a stage's role call them."""

    def __init__(self, scope: Construct, id: str, *, config: EnvironmentConfig, functions: FunctionFactory) -> None:
        super().__init__(scope, id)
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(VPC_CIDR),
            max_azs=2,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="isolated", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=26)
            ],
            enable_dns_support=False,
            enable_dns_hostnames=False,
            # nothing uses the VPC's default group; emptying it would take a custom resource (a function more)
            restrict_default_security_group=False,
        )
        acknowledge(
            self.vpc,
            "AwsSolutions-VPC7",
            "No flow can leave this VPC (no route out, no endpoint, DNS off, a security group without egress): "
            "flow logs could only record refused attempts, which the sandbox already reports and logs per run "
            "(error_kind 'network'); they would cost four resources per environment in a stack near its limit.",
        )
        self.security_group = ec2.SecurityGroup(
            self,
            "NoEgress",
            vpc=self.vpc,
            allow_all_outbound=False,  # CloudFormation then gets a rule no packet matches: no egress at all
            allow_all_ipv6_outbound=False,
            description="sandbox functions: no ingress, no egress",
        )
        network = FunctionNetwork(
            vpc=self.vpc,
            subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
            security_groups=(self.security_group,),
        )
        self.functions: dict[Tier, lambda_.Function] = {}
        for tier, limits in TIERS.items():
            function = functions.create(
                self,
                f"{SANDBOX_FUNCTION.id}-{tier}",
                SANDBOX_FUNCTION,
                description=f"sandbox: {tier} analysis scripts ({limits.memory_mb} MB, {limits.timeout_seconds:g} s)",
                memory_mb=function_memory_mb(tier),
                timeout_seconds=function_timeout_seconds(tier),
                reserved_concurrency=config.sandbox_concurrency,
                environment=environment_of(sandbox_tier=tier),
                network=network,
                tracing=False,
            )
            self._attach_to_vpc(function)
            self.functions[tier] = function

    def _attach_to_vpc(self, function: lambda_.Function) -> None:
        """What Lambda needs of the function's role to give it interfaces in the VPC (and nothing it runs uses)."""
        role = function.role
        assert role is not None
        stack = Stack.of(self)
        interfaces = stack.format_arn(service="ec2", resource="*", resource_name="*")
        role.add_to_principal_policy(iam.PolicyStatement(actions=list(ENI_DESCRIBE), resources=["*"]))
        role.add_to_principal_policy(iam.PolicyStatement(actions=list(ENI_MANAGE), resources=[interfaces]))
        why = (
            "Lambda creates and removes the function's network interfaces in the sandbox VPC with the function's "
            "role. {detail} The script never holds these credentials (its environment is scrubbed, this process "
            "is undumpable) and has no network path to any AWS endpoint."
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            why.format(detail="DescribeNetworkInterfaces and DescribeSubnets accept no resource but '*'."),
        )
        acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::{rendered(self, ENI_RESOURCES)}]",
            why.format(
                detail="An interface's id is known only once Lambda made it, and Lambda's guide asks that "
                "DeleteNetworkInterface cover every interface it may make: the account's EC2 resources in this region."
            ),
        )

    @property
    def function_names(self) -> dict[str, str]:
        """Tier -> function name: the runtime's `sandbox_functions` setting (CDK tokens until deploy)."""
        return {tier: function.function_name for tier, function in self.functions.items()}

    def grant_invoke(self, role: iam.IRole, tiers: tuple[Tier, ...] | None = None) -> None:
        """lambda:InvokeFunction on the sandbox functions of these tiers (all when None), nothing else."""
        chosen = tiers or tuple(self.functions)
        role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["lambda:InvokeFunction"], resources=[self.functions[tier].function_arn for tier in chosen]
            )
        )

    def settings(self) -> dict[str, str]:
        """The environment that lets a function's runtime reach these functions (Runtime.sandbox)."""
        return environment_of(sandbox_functions=Stack.of(self).to_json_string(self.function_names))
