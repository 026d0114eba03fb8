"""The model side of a stage: the provider protocol and versioned agent configurations."""
