"""Loading models: the embedded SmolLM2 GGUF, any llama GGUF, anything mlx-lm loads; tokenizers and chat templates."""
