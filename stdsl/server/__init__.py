"""The OpenAI-compatible HTTP server (`stcon serve`): requests become rows of the batch engine, tool replies
decode under the reply grammar, and every constrained reply is valid (docs/serving.md)."""
