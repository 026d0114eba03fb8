"""Idempotency-Key (IETF draft-ietf-httpapi-idempotency-key-header), on Powertools Idempotency.

A key is scoped to its user and bound to a fingerprint of the request (its operation and body):
- the first request with a key runs and its response is kept for EXPIRY_SECONDS;
- the same key and request again returns that response, marked `Idempotent-Replayed: true`;
- the same key with another request is 422 (the client reused a key by mistake);
- the same key while its first request is still running is 409 with Retry-After.
A request that fails (4xx, 5xx) keeps nothing: its key may be used again. After the expiry a key
is new again (documented in the OpenAPI description).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord

from missions.app.api.edge import app, error
from missions.core.accounts import idempotency_prefix

HEADER = "idempotency-key"
EXPIRY_SECONDS = 24 * 3600
KEY = re.compile(r"^[\x21-\x7e]{1,255}$")  # visible ASCII, as the draft's examples; quoted or not

Outcome = tuple[int, dict[str, Any]]


def once(
    operation: str, user: str, fingerprint: Any, produce: Callable[[], Outcome], store: BasePersistenceLayer
) -> Response[dict[str, Any]]:
    """Run `produce` (status, body) at most once per (user, Idempotency-Key), as the module docstring says."""
    raw = app.current_event.headers.get(HEADER)
    if raw is None:
        status, body = produce()
        return Response(status, "application/json", body=body)
    key = raw.strip().strip('"')
    if not KEY.match(key):
        return error(400, "Idempotency-Key must be 1 to 255 visible ASCII characters")
    replayed: list[bool] = []

    def mark_replayed(response: Any, idempotent_data: DataRecord) -> Any:
        replayed.append(True)
        return response

    config = IdempotencyConfig(
        event_key_jmespath="key",
        payload_validation_jmespath="fingerprint",
        expires_after_seconds=EXPIRY_SECONDS,
        hash_function="sha256",
        raise_on_no_idempotency_key=True,
        response_hook=mark_replayed,
    )
    if app.lambda_context is not None:
        config.register_lambda_context(app.lambda_context)  # an in-flight record expires with the invocation

    @idempotent_function(  # type: ignore[untyped-decorator]  # Powertools leaves it unannotated
        data_keyword_argument="request",
        persistence_store=store,
        config=config,
        key_prefix=idempotency_prefix(operation, user),
    )
    def run(request: dict[str, Any]) -> dict[str, Any]:
        status, body = produce()
        return {"status": status, "body": body}

    canonical = json.dumps(fingerprint, sort_keys=True, separators=(",", ":"), default=str)
    try:
        outcome = run(request={"key": f"{user}\n{key}", "fingerprint": f"{operation}\n{canonical}"})
    except IdempotencyValidationError:
        return error(422, "this Idempotency-Key was used with a different request; use a new key for a new request")
    except IdempotencyAlreadyInProgressError:
        return error(409, "the first request with this Idempotency-Key is still running", headers={"Retry-After": "1"})
    headers = {"Idempotent-Replayed": "true"} if replayed else None
    return Response(int(outcome["status"]), "application/json", body=outcome["body"], headers=headers)


__all__ = ["EXPIRY_SECONDS", "HEADER", "once"]
