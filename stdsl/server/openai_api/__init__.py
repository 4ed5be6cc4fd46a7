"""The OpenAI wire protocol every server room shares: request and response bodies, and errors as their 4xx bodies."""
