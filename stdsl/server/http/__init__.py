"""HTTP: the FastAPI app, request and response bodies, body checks and limits, errors, metrics, serving, shutdown."""
