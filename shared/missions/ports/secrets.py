"""Secrets (Secrets Manager in AWS): read when first needed, never put in an environment variable."""

from __future__ import annotations

from typing import Protocol


class SecretReader(Protocol):
    def read(self, secret_id: str) -> str:
        """The value of the secret; the adapter may cache it for a few minutes."""
