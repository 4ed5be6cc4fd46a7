"""What a model's files say, read without MLX: the tokenizer, its chat template, GGUF metadata and tensors.

Every layer may use these (the controller, the integrations in torch and vLLM processes, the runtime);
they import numpy, `tokenizers` and jinja2, never MLX or `stdsl.runtime`.
"""
