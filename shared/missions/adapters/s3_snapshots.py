"""Repository snapshots and uploads in S3: immutable archives under the owner's prefix.

Upload URLs are presigned PUTs with the declared Content-Length signed in, so a client cannot
send more than it registered (S3 refuses a body of another length). Locally the dev server
serves those PUTs itself; `presign_endpoint` points the URLs at it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from missions.core.errors import NotFound


class S3SnapshotStore:
    def __init__(
        self,
        bucket: str,
        client: Any,
        *,
        presign_endpoint: Callable[[], str | None] | None = None,
    ):
        self.bucket = bucket
        self._client = client
        self._presign_endpoint = presign_endpoint or (lambda: None)

    def upload(self, key: str, source: Path) -> None:
        self._client.upload_file(str(source), self.bucket, key)

    def download(self, key: str, destination: Path) -> None:
        try:
            self._client.download_file(self.bucket, key, str(destination))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                raise NotFound(f"snapshot {key}") from None
            raise

    def size(self, key: str) -> int | None:
        try:
            return int(self._client.head_object(Bucket=self.bucket, Key=key)["ContentLength"])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise

    def delete_prefix(self, prefix: str) -> int:
        deleted = 0
        for page in self._client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if keys:
                self._client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True})
                deleted += len(keys)
        return deleted

    def upload_url(self, key: str, size_bytes: int, expires_seconds: int) -> str:
        url = self._client.generate_presigned_url(
            "put_object",
            Params={"Bucket": self.bucket, "Key": key, "ContentLength": size_bytes},
            ExpiresIn=expires_seconds,
        )
        endpoint = self._presign_endpoint()
        if endpoint:  # the dev server stands in for S3: same path and signature, its own host
            from urllib.parse import urlsplit

            parts = urlsplit(url)
            path = parts.path if parts.path.startswith(f"/{self.bucket}/") else f"/{self.bucket}{parts.path}"
            url = f"{endpoint.rstrip('/')}{path}?{parts.query}"
        return str(url)
