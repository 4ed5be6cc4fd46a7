"""What the process needs for MLX beside any model: MLX's CPU BLAS bound to MKL (through ELF PLT slots), mlx-lm's
model code imported without its package start-up, worker threads that outlive interpreter finalization, and work
on a second CPU core (side streams)."""
