"""The batch engine: rows stepped together, their KV slots, the batched forward, the prompt cache, sampling."""
