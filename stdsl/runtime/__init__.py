"""stdsl.runtime"""
