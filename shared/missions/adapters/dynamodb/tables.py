"""CreateTable and UpdateTimeToLive requests for the tables `missions.core.specs` declares (the same specs the
CDK stack deploys): the emulation and the tests make their tables with them."""

from __future__ import annotations

from typing import Any

from missions.core.specs import TableSpec


def table_definition(spec: TableSpec, name: str) -> dict[str, Any]:
    """CreateTable kwargs for a spec (all key attributes are strings)."""
    definition: dict[str, Any] = {
        "TableName": name,
        "KeySchema": spec.key_schema(),
        "AttributeDefinitions": [{"AttributeName": attr, "AttributeType": "S"} for attr in spec.attributes()],
        "BillingMode": "PAY_PER_REQUEST",
    }
    if spec.indexes:
        definition["GlobalSecondaryIndexes"] = [
            {
                "IndexName": index.name,
                "KeySchema": [{"AttributeName": index.partition_key, "KeyType": "HASH"}]
                + ([{"AttributeName": index.sort_key, "KeyType": "RANGE"}] if index.sort_key else []),
                "Projection": {"ProjectionType": index.projection_type}
                | ({"NonKeyAttributes": list(index.non_key_attributes)} if index.non_key_attributes else {}),
            }
            for index in spec.indexes
        ]
    if spec.stream:
        definition["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    return definition


def time_to_live(spec: TableSpec, name: str) -> dict[str, Any] | None:
    """UpdateTimeToLive kwargs for a spec, or None when the table has no TTL attribute."""
    if not spec.ttl_attribute:
        return None
    return {
        "TableName": name,
        "TimeToLiveSpecification": {"Enabled": True, "AttributeName": spec.ttl_attribute},
    }
