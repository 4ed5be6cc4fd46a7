"""Per-row caches of a running batch for every cache kind mlx-lm models keep: attention keys (full or within a
sliding window), recurrent states, and lists of both, each row at its own length and fed ragged spans."""
