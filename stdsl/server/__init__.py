"""stdsl.server"""
