"""Capabilities as plugins: the registry, capability.toml's schema, typed stages, tools, connectors."""
