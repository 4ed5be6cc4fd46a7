"""stdsl.runtime: models, the batch engine and its policies (MLX).

Importing the runtime binds MKL for MLX's CPU backend first (`blas.bind_blas`), so the binding
happens when MLX is needed, not as a side effect of `import stdsl` (compiling never loads MLX).
mlx-lm's model code is imported without its package start-up (`deferred_package`): the runtime
needs its models and caches, not transformers or torch.
"""

from stdsl.runtime.blas import bind_blas
from stdsl.runtime.deferred_package import defer_package

bind_blas()
defer_package("mlx_lm")
