"""A deployed stack's HTTP API as the CLI reaches it, in front of the stack deployed into moto.

The CLI's transport (`missions.client.Transport`) is this object: a request to the host of the
stack's `ApiUrl` output passes the played JWT authorizer (tests/support/cognito.py) and becomes
an HTTP API v2 event for the *deployed* api function, invoked through moto's Lambda (so with its
deployed environment and role-checked calls); a request to the `ApiTokenUrl` output is the played
token endpoint's; a presigned S3 URL goes to moto's S3 (moto intercepts `requests`). Any other host
does not resolve. Routes are not checked here: the function answers 404 for what it does not
serve, as the stack's route table would (it is built from the same OpenAPI document).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from infra.components.api import api_routes
from missions.client import ClientError, Reply
from missions.local.devserver import http_event
from tests.support.cognito import PlayedCognito
from tests.support.deploy import Deployment

PUBLIC = frozenset(api_routes(public=True))


class DeployedApi:
    def __init__(self, session: Any, deployment: Deployment, cognito: PlayedCognito):
        outputs = {re.sub(r"[0-9A-F]{8}$", "", key): value for key, value in deployment.outputs.items()}  # CDK's hash
        self.api_host = urlsplit(outputs["ApiUrl"]).netloc.lower()  # a host's case does not matter (httpx lowers it)
        self.token_url = outputs["ApiTokenUrl"]
        self.function = deployment.function_named("missions-api")
        self.lambda_ = session.client("lambda")
        self.cognito = cognito
        self.calls: list[tuple[str, str, int]] = []  # method, path, status of each API call

    def __call__(self, method: str, url: str, headers: Mapping[str, str], data: bytes | None) -> Reply:
        parts = urlsplit(url)
        if url == self.token_url:
            return self.cognito.token_endpoint(dict(headers), data or b"")
        if parts.netloc.lower() == self.api_host:
            reply = self._api(method, parts.path, parts.query, dict(headers), data or b"")
            self.calls.append((method, parts.path, reply.status))
            return reply
        if parts.netloc.endswith("amazonaws.com") and ".s3" in parts.netloc:
            import requests  # moto answers it

            response = requests.request(method, url, data=data, headers=dict(headers), timeout=30)
            return Reply(response.status_code, {k.lower(): v for k, v in response.headers.items()}, response.content)
        raise ClientError(f"cannot reach {url}: no such host in this test")

    def _api(self, method: str, path: str, query: str, headers: dict[str, str], body: bytes) -> Reply:
        claims = self.cognito.claims(headers)
        public = (method, path) in PUBLIC  # routes without an authorizer (/health, /ready, /openapi.json)
        if claims is None and not public:  # the authorizer answers before any function runs
            return Reply(401, {"content-type": "application/json"}, b'{"message":"Unauthorized"}')
        event = http_event(method, path, query, headers, body, claims["sub"] if claims and not public else None)
        response = self.lambda_.invoke(FunctionName=self.function, Payload=json.dumps(event).encode())
        result = json.loads(response["Payload"].read())
        if "FunctionError" in response:  # API Gateway's answer when its function fails
            return Reply(500, {"content-type": "application/json"}, b'{"message":"Internal Server Error"}')
        raw = result.get("body") or ""
        data = base64.b64decode(raw) if result.get("isBase64Encoded") else raw.encode()
        return Reply(
            int(result["statusCode"]), {k.lower(): str(v) for k, v in (result.get("headers") or {}).items()}, data
        )
