"""Custom resource replies over HTTPS: a PUT of the response object to the request's presigned S3 URL.

Why not crhelper: its reply goes through a module-level function (no way to hand a test or the emulation
another transport without patching) and it starts timer threads of its own; the protocol is one PUT,
which urllib3 (botocore's own HTTP library, so nothing new in the layer) makes with its retry policy.
"""

from __future__ import annotations

import json
from typing import Any

import urllib3

from missions.core.errors import DeploymentError

# a presigned URL refuses a Content-Type it was not signed with: send none
_HEADERS = {"Content-Type": ""}
RETRIES = urllib3.Retry(total=5, backoff_factor=0.5, status_forcelist=(500, 502, 503, 504), allowed_methods=["PUT"])


class HttpDeploymentReplies:
    def __init__(self, http: urllib3.PoolManager | None = None, timeout_seconds: float = 10.0):
        self._http = http or urllib3.PoolManager(retries=RETRIES)
        self._timeout = urllib3.Timeout(total=timeout_seconds)

    def send(self, url: str, reply: dict[str, Any]) -> None:
        body = json.dumps(reply).encode()
        response = self._http.request(
            "PUT", url, body=body, headers={**_HEADERS, "Content-Length": str(len(body))}, timeout=self._timeout
        )
        if not 200 <= response.status < 300:
            raise DeploymentError(f"CloudFormation refused the reply: HTTP {response.status}")


__all__ = ["HttpDeploymentReplies"]
