"""stdsl constraints inside other engines: transformers (`stdsl.integrations.transformers`) and vLLM
(`stdsl.integrations.vllm`), both on the torch mask path and the per-request controllers, one token per step.

The engine modules import their engine; this package itself imports neither.
"""
