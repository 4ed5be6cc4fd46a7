"""stdsl.kernels"""
