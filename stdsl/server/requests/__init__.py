"""A request as engine work: the chat prompt rendered and tokenized, reasoning and tool plans, rows read as replies."""
