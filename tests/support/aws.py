"""Fake AWS credentials for tests that talk to moto: never a real account."""

from __future__ import annotations

import threading
from typing import Any

import pytest

FAKE_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def use_fake_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in FAKE_AWS_ENV.items():
        monkeypatch.setenv(name, value)


class SerializedClient:
    """A boto3 client whose calls run one at a time: DynamoDB's per-request atomicity, in moto
    (moto itself is not thread-safe for conditional writes; DynamoDB is)."""

    def __init__(self, client: Any):
        self._client = client
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attribute(*args, **kwargs)

        return call
