"""cdk-nag acknowledgements: every one names its finding and says why it is acceptable."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Stack, Token, Validations
from constructs import IConstruct


def acknowledge(construct: IConstruct, finding: str, reason: str) -> None:
    Validations.of(construct).acknowledge(Acknowledgment(id=finding, reason=reason))


def rendered(scope: IConstruct, arn: str) -> str:
    """An ARN template ({partition}, {region}, {account}) as cdk-nag prints it in finding ids:
    pseudo parameters when the stack's environment is unknown, the values when it is set."""
    stack = Stack.of(scope)

    def value(attribute: str, pseudo: str) -> str:
        text = getattr(stack, attribute)
        return f"<AWS::{pseudo}>" if Token.is_unresolved(text) else text

    return arn.format(
        partition=value("partition", "Partition"),
        region=value("region", "Region"),
        account=value("account", "AccountId"),
    )
