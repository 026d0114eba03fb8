"""What the stores' conformance suites share: DynamoDB and S3 in moto, each table made when a suite asks."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from missions.adapters.dynamodb.tables import table_definition, time_to_live
from missions.core.specs import TableSpec
from tests.support.aws import FAKE_AWS_ENV, use_fake_aws

REGION = FAKE_AWS_ENV["AWS_DEFAULT_REGION"]


@dataclass
class Moto:
    ddb: Any
    s3: Any
    bucket: str = "missions-conformance-test"

    def table(self, spec: TableSpec) -> str:
        """Make the spec's table as the stack does (its TTL too) and return its name."""
        name = f"test-{spec.id}"
        self.ddb.create_table(**table_definition(spec, name))
        ttl = time_to_live(spec, name)
        if ttl:
            self.ddb.update_time_to_live(**ttl)
        return name


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Moto]:
    """A fresh moto account for one case: no table yet, one bucket."""
    import boto3
    from moto import mock_aws

    use_fake_aws(monkeypatch)
    with mock_aws():
        moto = Moto(boto3.client("dynamodb", region_name=REGION), boto3.client("s3", region_name=REGION))
        moto.s3.create_bucket(Bucket=moto.bucket)
        yield moto
