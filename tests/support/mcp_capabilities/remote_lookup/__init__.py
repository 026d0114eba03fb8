"""remote_lookup: its tools are remote MCP servers' (see capability.toml); its stages output nothing."""
