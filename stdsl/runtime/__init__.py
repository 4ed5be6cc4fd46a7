"""stdsl.runtime: models, the batch engine and its policies (MLX).

Importing it changes nothing in the process: MKL is bound for MLX's CPU backend by `stdsl.load` and the
`stcon` command (`blas.bind_blas`), and mlx-lm's model code is imported without its package start-up where a
module needs it (`mlx_lm_models`).
"""
