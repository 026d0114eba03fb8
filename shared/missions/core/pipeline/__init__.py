"""A pipeline and what it compiles to: its configuration, routing, the compiler to ASL, the graph."""
