"""moto's Lambda, patched: functions run in-process, and stream records reach them as Lambda sends them.

1. moto runs functions only in Docker. `LambdaFunction._invoke_lambda` is replaced so a function
   registered in `functions` is called in-process. This one patch serves Step Functions Lambda tasks,
   waitForTaskToken, boto3 `invoke` and event source mappings.
3. DynamoDB Streams -> Lambda: moto fails to JSON-encode records holding Binary attributes;
   `LambdaBackend.send_dynamodb_items` encodes them base64, as Lambda does.
"""

from __future__ import annotations

import json
import traceback
import uuid
from typing import Any

from missions.local.moto import functions
from missions.local.moto._mechanism import Patch


def _invoke_lambda(self: Any, event: Any = None) -> tuple[str, bool, str]:
    """moto's contract: return (payload json, errored, logs)."""
    handler = functions.resolve(self.function_name, dict(getattr(self, "environment_vars", None) or {}))
    if handler is None:
        error: functions.FunctionError = {
            "errorType": "FunctionNotRegistered",
            "errorMessage": f"no in-process handler registered for '{self.function_name}'",
        }
        return json.dumps(error), True, ""
    payload = json.loads(event) if isinstance(event, (str, bytes)) else (event or {})
    context = functions.LocalContext(
        function_name=self.function_name,
        memory_limit_in_mb=int(getattr(self, "memory_size", 256) or 256),
        aws_request_id=str(uuid.uuid4()),
        invoked_function_arn=getattr(self, "function_arn", ""),
        timeout_seconds=timeout_of(self),
    )
    try:
        result = functions.call(handler, payload, context)
    except Exception as exc:  # a function error, as Lambda reports it
        error = {
            "errorType": type(exc).__name__,
            "errorMessage": str(exc),
            "stackTrace": traceback.format_exception(exc)[-5:],
        }
        return json.dumps(error), True, ""
    return json.dumps(result), False, ""


def timeout_of(function: Any) -> float:
    """A moto LambdaFunction's configured Timeout (Lambda's own default is 3 seconds)."""
    return float(getattr(function, "timeout", None) or 3)


def configured_timeout(arn: str) -> float:
    """The Timeout moto holds for the function an ARN names (the default when moto has none)."""
    from moto.awslambda.models import lambda_backends

    try:
        _, _, _, region, account = arn.split(":")[:5]
        return timeout_of(lambda_backends[account][region].get_function(arn))
    except Exception:  # a target moto does not know: a hand-built context's default
        return functions.DEFAULT_TIMEOUT_SECONDS


def _send_dynamodb_items(self: Any, function_arn: str, items: Any, source: str) -> Any:
    """moto's own, with Binary attributes base64-encoded as Lambda delivers them."""
    import base64
    from datetime import datetime

    from moto.core.utils import unix_time

    records = []
    for item in items:
        record = item.to_json()
        dynamodb = dict(record["dynamodb"])
        if isinstance(dynamodb.get("ApproximateCreationDateTime"), datetime):
            dynamodb["ApproximateCreationDateTime"] = unix_time(dynamodb["ApproximateCreationDateTime"])
        records.append(
            {
                "eventID": record["eventID"],
                "eventName": record["eventName"],
                "eventVersion": record["eventVersion"],
                "eventSource": record["eventSource"],
                "awsRegion": self.region_name,
                "dynamodb": dynamodb,
                "eventSourceARN": source,
            }
        )

    def encode(value: Any) -> str:
        if isinstance(value, bytes | bytearray):
            return base64.b64encode(value).decode()
        raise TypeError(f"{type(value).__name__} is not JSON serializable")

    return self._lambdas.get_arn(function_arn).invoke(json.dumps({"Records": records}, default=encode), {}, {})


INVOKE = Patch(
    "moto.awslambda.models:LambdaFunction",
    "_invoke_lambda",
    _invoke_lambda,
    "1: moto runs a function only in Docker; here its registered handler runs in-process",
)
STREAM_RECORDS = Patch(
    "moto.awslambda.models:LambdaBackend",
    "send_dynamodb_items",
    _send_dynamodb_items,
    "3: moto cannot JSON-encode a stream record holding Binary; Lambda sends it base64",
)
PATCHES = (INVOKE, STREAM_RECORDS)
