"""What the runtime remembers for a user: long-term memory, a conversation's working memory, preferences."""
