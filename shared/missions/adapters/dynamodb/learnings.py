"""Per-capability learnings in DynamoDB (missions.core.specs.LEARNINGS): the LearningsStore adapter."""

from __future__ import annotations

from missions.adapters.dynamodb._items import DynamoTable
from missions.core.mission.envelope import utcnow
from missions.ports.learnings import Learnings, learning_increments


class DynamoLearningsStore(DynamoTable):
    """Learnings table (partition "capability"): one item per capability, counters bumped with ADD.

    A single UpdateItem with ADD is atomic in DynamoDB, so concurrent feedback never loses a count
    (a read-modify-write would).
    """

    def record(self, capability: str, *, completed: bool | None, rating: int | None) -> None:
        increments = learning_increments(completed, rating)
        names = {f"#n{i}": name for i, name in enumerate(increments)}
        values = {f":v{i}": {"N": str(amount)} for i, amount in enumerate(increments.values())}
        self._client.update_item(
            TableName=self.table_name,
            Key={"capability": {"S": capability}},
            UpdateExpression="ADD "
            + ", ".join(f"#n{i} :v{i}" for i in range(len(increments)))
            + " SET updated_at = :now",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues={**values, ":now": {"S": utcnow()}},
        )

    def get(self, capability: str) -> Learnings:
        response = self._client.get_item(
            TableName=self.table_name, Key={"capability": {"S": capability}}, ConsistentRead=True
        )
        item = response.get("Item") or {}
        counts = {name: int(item[name]["N"]) for name in _COUNTERS if name in item}
        return Learnings(capability=capability, **counts)


_COUNTERS = ("completions", "failures", "rating_sum", "rating_count", "feedback_count")
