"""HTTP: the FastAPI app, body checks and limits, metrics, serving, shutdown."""
