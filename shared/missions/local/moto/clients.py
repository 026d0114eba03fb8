"""The emulation's clients, lean: what moto never reads is not computed for each request.

- Unsigned: moto checks no signature, and SigV4 signing was about a twelfth of the dev server's CPU.
- The User-Agent built once: botocore builds the whole string twice for each request (the second time
  to name the features that request used), about a twentieth of the CPU; moto reads it only for a
  region, which the URL already names.

For the services a mission calls all the time (DynamoDB, Step Functions, Lambda), the emulation's own
clients and moto's clients for a state machine's tasks. S3's stay as they are: they presign URLs.
"""

from __future__ import annotations

from typing import Any, TypeVar

from botocore.handlers import disable_signing

Client = TypeVar("Client")


class _UserAgentOnce:
    """botocore's User-Agent creator, its string built once."""

    def __init__(self, creator: Any) -> None:
        self._creator = creator
        self._string: str = creator.to_string()

    def to_string(self) -> str:
        return self._string

    def __getattr__(self, name: str) -> Any:
        return getattr(self._creator, name)


def lean(client: Client) -> Client:
    """The same client, sending its requests unsigned with the User-Agent it was made with."""
    botocore_client: Any = client
    botocore_client.meta.events.register_first("choose-signer", disable_signing)
    creator = botocore_client._user_agent_creator
    service_id = botocore_client.meta.service_model.service_id.hyphenize()
    botocore_client.meta.events.unregister(
        f"request-created.{service_id}", creator.rebuild_and_replace_user_agent_handler
    )
    botocore_client._user_agent_creator = _UserAgentOnce(creator)
    return client
