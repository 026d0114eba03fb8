"""DynamoDB adapters of the ports, one module per store (each named for the port it implements).

Clients are injected (or created in the constructor, never at import time) and only the low-level
client is used; `_items` holds the attribute codec and the paged and batched requests they share.
Table layouts follow `missions.core.specs` (the same specs the CDK stack deploys; `tables` turns
them into CreateTable requests).
"""
