"""stdsl.compiler"""
