"""The emulation's lean clients (missions.local.moto.clients): unsigned, the User-Agent built once, and
answered by moto as a plain client is."""

from __future__ import annotations

from typing import Any

import pytest

from missions.local.moto.clients import lean
from tests.integration.moto_patches.conftest import REGION, Aws


def _sent(client: Any) -> list[dict[str, str]]:
    """The headers of each request the client sends (as moto receives them)."""
    headers: list[dict[str, str]] = []
    client.meta.events.register("before-send", lambda request, **_: headers.append(dict(request.headers)))
    return headers


def test_a_lean_client_sends_unsigned_requests_with_its_first_user_agent(
    aws: Aws, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3
    from botocore.useragent import UserAgentString

    # Given a plain DynamoDB client and a lean one, the User-Agent's builds counted
    builds: list[int] = []
    real = UserAgentString.to_string
    monkeypatch.setattr(UserAgentString, "to_string", lambda self: builds.append(1) or real(self))
    plain = boto3.client("dynamodb", region_name=REGION)
    slim = lean(boto3.client("dynamodb", region_name=REGION))  # its one build
    plain_headers, slim_headers = _sent(plain), _sent(slim)
    plain.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )

    # When each writes and reads
    answers = []
    built_before = len(builds)
    for client, pk in ((slim, "b"), (plain, "a")):
        client.put_item(TableName="t", Item={"pk": {"S": pk}, "n": {"N": "1"}})
        answers.append(client.get_item(TableName="t", Key={"pk": {"S": pk}}, ConsistentRead=True)["Item"]["n"])
        if client is slim:
            slim_builds, built_before = len(builds) - built_before, len(builds)

    # Then moto answered both alike; the plain one signed and built its User-Agent each time, the lean one neither
    assert answers == [{"N": "1"}, {"N": "1"}]
    assert all("Authorization" in h for h in plain_headers)
    assert slim_headers and not any("Authorization" in h for h in slim_headers)
    assert slim_builds == 0 and len(builds) > built_before
    assert {h["User-Agent"].split()[0] for h in slim_headers} == {h["User-Agent"].split()[0] for h in plain_headers}
