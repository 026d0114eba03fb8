"""Mission types. Each sub-package exposes CAPABILITY; the registry discovers them."""
