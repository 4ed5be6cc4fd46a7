"""A request's constraint: its spec as plain JSON, compiled in worker processes, cached by bytes."""
