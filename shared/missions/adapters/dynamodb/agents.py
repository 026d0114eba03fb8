"""Agent configuration versions and usage records in DynamoDB: the AgentStore and UsageStore adapters.

Agents table (missions.core.specs.AGENTS), partition `capability`, sort key `sk`:
    state#<agent>                  the agent's state: active version, enabled, history, revision
    version#<agent>#<000001>       one immutable version (its settings as JSON)
    audit#<agent>#<at>#<random>    who changed what, when
so a mission's start reads every agent's state of its capability with one query, and a stage reads the
version it pinned with one get. A write is one transaction: the version (if any), the state conditioned
on the revision it read, and its audit entry, so the trail cannot miss a change nor record one that failed.

Usage table (missions.core.specs.USAGE), partition `pk`, sort key `sk`:
    mission#<id>   call#<at>#<random>                          one model call (expires: USAGE_TTL_DAYS)
    totals#<user>  <capability>#<agent>#<version>#<model>      that user's calls summed (ADD: atomic)
    totals#*       <capability>#<agent>#<version>#<model>      everyone's
    spend#<user>   <UTC day>                                   the user's dollars that day (missions.core.cost.budget;
                                                               ADD, read back by the same write; expires)
    budget#<user>  daily                                       the user's own daily budget, set by an operator
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

from missions.adapters.dynamodb._items import DynamoTable
from missions.core.cost.budget import COST_UNITS, day_of, dollars, units
from missions.core.cost.usage import UsageRecord, UsageTotal
from missions.core.errors import ConflictError
from missions.core.llm.agents import AgentState, AgentVersion, AuditEntry

# totals are summed as integers (ADD of decimals drifts, and moto re-reads a zero decimal as "0E-8"):
# dollars in units of 1e-8 (costs are rounded so), milliseconds in microseconds
LATENCY_UNITS = 1000
USAGE_TTL_DAYS = 400  # a year of calls to compare, then the records go (their totals stay)
EVERYONE = "*"


def _client_or_default(client: Any) -> Any:
    if client is None:
        import boto3

        client = boto3.client("dynamodb")
    return client


class DynamoAgentStore(DynamoTable):
    # -- reads -----------------------------------------------------------------------------------

    def _query(
        self, capability: str, prefix: str, *, newest_first: bool = False, limit: int | None = None
    ) -> list[Any]:
        items: list[Any] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "capability = :c AND begins_with(sk, :p)",
            "ExpressionAttributeValues": {":c": {"S": capability}, ":p": {"S": prefix}},
            "ScanIndexForward": not newest_first,
            "ConsistentRead": True,
        }
        while True:
            if limit is not None:
                kwargs["Limit"] = limit - len(items)
            response = self._client.query(**kwargs)
            items += response.get("Items", [])
            if "LastEvaluatedKey" not in response or (limit is not None and len(items) >= limit):
                return items
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def _get(self, capability: str, sk: str) -> Any:
        return self._client.get_item(
            TableName=self.table_name, Key={"capability": {"S": capability}, "sk": {"S": sk}}, ConsistentRead=True
        ).get("Item")

    def states(self, capability: str) -> list[AgentState]:
        return [AgentState.model_validate_json(item["body"]["S"]) for item in self._query(capability, "state#")]

    def state(self, capability: str, agent: str) -> AgentState | None:
        item = self._get(capability, f"state#{agent}")
        return AgentState.model_validate_json(item["body"]["S"]) if item else None

    def version(self, capability: str, agent: str, version: int) -> AgentVersion | None:
        item = self._get(capability, _version_key(agent, version))
        return AgentVersion.model_validate_json(item["body"]["S"]) if item else None

    def versions(self, capability: str, agent: str) -> list[AgentVersion]:
        found = self._query(capability, f"version#{agent}#")
        return [AgentVersion.model_validate_json(item["body"]["S"]) for item in found]

    def audit(self, capability: str, agent: str, limit: int = 100) -> list[AuditEntry]:
        found = self._query(capability, f"audit#{agent}#", newest_first=True, limit=limit)
        return [AuditEntry.model_validate_json(item["body"]["S"]) for item in found]

    # -- writes ----------------------------------------------------------------------------------

    def add_version(self, version: AgentVersion, state: AgentState, audit: AuditEntry) -> None:
        put_version = {
            "Put": {
                "TableName": self.table_name,
                "Item": self._item(version.capability, _version_key(version.agent, version.version), version),
                "ConditionExpression": "attribute_not_exists(sk)",
            }
        }
        self._transact([put_version, self._put_state(state), self._put_audit(audit)], state)

    def put_state(self, state: AgentState, audit: AuditEntry) -> None:
        self._transact([self._put_state(state), self._put_audit(audit)], state)

    def _transact(self, writes: list[dict[str, Any]], state: AgentState) -> None:
        try:
            self._client.transact_write_items(TransactItems=writes)
        except self._client.exceptions.TransactionCanceledException as exc:
            raise ConflictError(
                f"agent '{state.agent}' of '{state.capability}' changed meanwhile; read it again"
            ) from exc

    def _put_state(self, state: AgentState) -> dict[str, Any]:
        item = {**self._item(state.capability, f"state#{state.agent}", state), "revision": {"N": str(state.revision)}}
        if state.revision <= 1:
            condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(sk)"}
        else:
            condition = {
                "ConditionExpression": "revision = :read",
                "ExpressionAttributeValues": {":read": {"N": str(state.revision - 1)}},
            }
        return {"Put": {"TableName": self.table_name, "Item": item, **condition}}

    def _put_audit(self, audit: AuditEntry) -> dict[str, Any]:
        sk = f"audit#{audit.agent}#{audit.at}#{uuid.uuid4().hex[:8]}"
        return {"Put": {"TableName": self.table_name, "Item": self._item(audit.capability, sk, audit)}}

    @staticmethod
    def _item(capability: str, sk: str, body: AgentState | AgentVersion | AuditEntry) -> dict[str, Any]:
        return {"capability": {"S": capability}, "sk": {"S": sk}, "body": {"S": body.model_dump_json()}}


def _version_key(agent: str, version: int) -> str:
    return f"version#{agent}#{version:06d}"


# attribute names of a totals item (several are DynamoDB reserved words: always named through placeholders)
_TOTAL_NAMES = {
    "calls": "calls",
    "errors": "errors",
    "ti": "tokens_in",
    "to": "tokens_out",
    "cost": "cost_units",
    "lat": "latency_units",
    "cap": "capability",
    "agent": "agent",
    "version": "version",
    "model": "model",
}


class DynamoUsageStore:
    def __init__(self, table_name: str, client: Any = None, ttl_days: int = USAGE_TTL_DAYS):
        self.table_name, self.ttl_days = table_name, ttl_days
        self._client = _client_or_default(client)

    def record(self, record: UsageRecord, day: str | None = None) -> float | None:
        self._client.put_item(
            TableName=self.table_name,
            Item={
                "pk": {"S": f"mission#{record.mission_id}"},
                "sk": {"S": f"call#{record.at}#{uuid.uuid4().hex[:8]}"},
                "body": {"S": record.model_dump_json()},
                "expires_at": {"N": str(int(time.time()) + self.ttl_days * 86400)},
            },
        )
        return self._add_spend(record, day or day_of(record.at)) if units(record.cost_usd) else None

    def add_to_totals(self, records: Sequence[UsageRecord]) -> None:
        """One ADD per (capability, agent, version, model) and owner: the calls' sums, each call's dollars and
        latency in the units a single call would have added."""
        sums: dict[tuple[str, str], dict[str, int]] = {}
        named: dict[str, UsageRecord] = {}
        for record in records:
            sk = f"{record.capability}#{record.agent}#{record.version or 0:06d}#{record.model}"
            named.setdefault(sk, record)
            for owner in (record.user_id, EVERYONE):
                total = sums.setdefault((owner, sk), dict.fromkeys(("calls", "errors", "ti", "to", "c", "l"), 0))
                total["calls"] += 1
                total["errors"] += 0 if record.outcome == "ok" else 1
                total["ti"] += record.tokens_in
                total["to"] += record.tokens_out
                total["c"] += units(record.cost_usd)
                total["l"] += round(record.latency_ms * LATENCY_UNITS)
        for (owner, sk), total in sums.items():
            first = named[sk]
            self._client.update_item(
                TableName=self.table_name,
                Key={"pk": {"S": f"totals#{owner}"}, "sk": {"S": sk}},
                UpdateExpression="ADD #calls :calls, #errors :errors, #ti :ti, #to :to, #cost :c, #lat :l "
                "SET #cap = :cap, #agent = :agent, #version = :v, #model = :m",
                ExpressionAttributeNames={f"#{short}": name for short, name in _TOTAL_NAMES.items()},
                ExpressionAttributeValues={
                    **{f":{name}": {"N": str(value)} for name, value in total.items()},
                    ":cap": {"S": first.capability},
                    ":agent": {"S": first.agent},
                    ":v": {"S": json.dumps(first.version)},
                    ":m": {"S": first.model},
                },
            )

    def _add_spend(self, record: UsageRecord, day: str) -> float:
        """The call's dollars onto its user's day, and the day's total as that one write left it."""
        response = self._client.update_item(
            TableName=self.table_name,
            Key={"pk": {"S": f"spend#{record.user_id}"}, "sk": {"S": day}},
            UpdateExpression="ADD #cost :c SET expires_at = if_not_exists(expires_at, :x)",
            ExpressionAttributeNames={"#cost": "cost_units"},
            ExpressionAttributeValues={
                ":c": {"N": str(units(record.cost_usd))},
                ":x": {"N": str(int(time.time()) + self.ttl_days * 86400)},
            },
            ReturnValues="UPDATED_NEW",
        )
        return dollars(int(response["Attributes"]["cost_units"]["N"]))

    def spent(self, user_id: str, day: str) -> float:
        item = self._client.get_item(
            TableName=self.table_name, Key={"pk": {"S": f"spend#{user_id}"}, "sk": {"S": day}}, ConsistentRead=True
        ).get("Item")
        return dollars(int(item["cost_units"]["N"])) if item else 0.0

    def budget_of(self, user_id: str) -> float | None:
        item = self._client.get_item(
            TableName=self.table_name, Key={"pk": {"S": f"budget#{user_id}"}, "sk": {"S": "daily"}}, ConsistentRead=True
        ).get("Item")
        return dollars(int(item["usd_units"]["N"])) if item else None

    def set_budget(self, user_id: str, daily_budget_usd: float | None) -> None:
        key = {"pk": {"S": f"budget#{user_id}"}, "sk": {"S": "daily"}}
        if daily_budget_usd is None:
            self._client.delete_item(TableName=self.table_name, Key=key)
            return
        item = {**key, "usd_units": {"N": str(units(daily_budget_usd))}}
        self._client.put_item(TableName=self.table_name, Item=item)

    def for_mission(self, mission_id: str) -> list[UsageRecord]:
        return [
            UsageRecord.model_validate_json(item["body"]["S"]) for item in self._query(f"mission#{mission_id}", "call#")
        ]

    def totals(self, capability: str, user_id: str | None = None) -> list[UsageTotal]:
        items = self._query(f"totals#{user_id if user_id is not None else EVERYONE}", f"{capability}#")
        return [
            UsageTotal(
                capability=item["capability"]["S"],
                agent=item["agent"]["S"],
                version=json.loads(item["version"]["S"]),
                model=item["model"]["S"],
                calls=int(item["calls"]["N"]),
                errors=int(item["errors"]["N"]),
                tokens_in=int(item["tokens_in"]["N"]),
                tokens_out=int(item["tokens_out"]["N"]),
                cost_usd=round(int(item["cost_units"]["N"]) / COST_UNITS, 8),
                latency_ms=round(int(item["latency_units"]["N"]) / LATENCY_UNITS, 3),
            )
            for item in items
        ]

    def _query(self, pk: str, prefix: str) -> list[Any]:
        items: list[Any] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "pk = :p AND begins_with(sk, :s)",
            "ExpressionAttributeValues": {":p": {"S": pk}, ":s": {"S": prefix}},
        }
        while True:
            response = self._client.query(**kwargs)
            items += response.get("Items", [])
            if "LastEvaluatedKey" not in response:
                return items
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
