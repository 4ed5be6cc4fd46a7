"""stdsl constraints inside other engines: transformers (`stdsl.integrations.transformers`) and vLLM
(`stdsl.integrations.vllm`), both thin adapters over the controller (`stdsl.control`), one token per step.

The engine modules import their engine; this package itself imports neither, and nothing here imports MLX,
`stdsl.runtime` or `stdsl.server` (the processors run in torch and vLLM processes).
"""
