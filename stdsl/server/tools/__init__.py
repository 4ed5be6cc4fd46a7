"""Tool calls: the reply grammar beside tools, the reader of replies, custom tools, and each family's call format."""
