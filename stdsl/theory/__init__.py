"""stdsl.theory"""
