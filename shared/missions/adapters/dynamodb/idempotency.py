"""Idempotency-Key records per user (table `missions.core.specs.IDEMPOTENCY`), on Powertools' DynamoDB layer.

Powertools keys a record by "<key prefix>#<hash of the key>"; the API's prefix is "<operation>#<user>"
(missions.core.accounts.idempotency_prefix), so the hash hides the user. This layer puts each record in its user's
partition ("user#<user>", the hashed key as sort key): an erasure finds every record of a user with one
query, where a hashed partition key would need a scan of the whole table.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

from missions.core.accounts import idempotency_owner

KEY_ATTRIBUTE = "id"
SORT_ATTRIBUTE = "sk"


def user_partition(user_id: str) -> str:
    return f"user#{user_id}"


class UserIdempotencyLayer(DynamoDBPersistenceLayer):
    def __init__(self, table_name: str, boto3_client: Any = None) -> None:
        super().__init__(
            table_name=table_name,
            key_attr=KEY_ATTRIBUTE,
            sort_key_attr=SORT_ATTRIBUTE,
            static_pk_value="user#",  # unused: every key gets its user's partition (_get_key)
            boto3_client=boto3_client,
        )

    def _get_key(self, idempotency_key: str) -> dict[str, Any]:
        return {
            KEY_ATTRIBUTE: {"S": user_partition(idempotency_owner(idempotency_key))},
            SORT_ATTRIBUTE: {"S": idempotency_key},
        }


__all__ = ["UserIdempotencyLayer", "user_partition"]
