"""Long-term memory: namespaced items per user, with semantic search."""

from missions.longterm.ports import LongTermMemory, MemoryChange, MemoryItem, MemoryValidationError, Namespace

__all__ = ["LongTermMemory", "MemoryChange", "MemoryItem", "MemoryValidationError", "Namespace"]
