"""Capabilities that exist for the tests, loaded as `Registry(package="tests.support.mcp_capabilities")`."""
