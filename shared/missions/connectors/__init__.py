"""Connectors: a protocol per kind of external service, each with bundled deterministic sample
data so every mission runs offline. `base.call_source` retries a failing source and then
reports it; a failure is never silently dropped."""
