"""stdsl.runtime: models, the batch engine and its policies (MLX).

Importing the runtime binds MKL for MLX's CPU backend first (`blas.bind_blas`), so the binding
happens when MLX is needed, not as a side effect of `import stdsl` (compiling never loads MLX).
"""

from stdsl.runtime.blas import bind_blas

bind_blas()
