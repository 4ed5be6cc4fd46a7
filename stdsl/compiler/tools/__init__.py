"""Tool calls as constraints: the tool-call formats of model families, the reply grammar (free text, then calls)
and the input languages of custom tools. Pure compiler code: the server and the integrations both use it."""
