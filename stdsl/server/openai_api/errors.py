"""HTTP errors of the server: OpenAI-style bodies, a 4xx for every fault of the request, 429 under overload."""

from __future__ import annotations

from stdsl.errors import (
    BudgetError,
    Cancelled,
    CompileError,
    CompileTimeError,
    ContextLengthError,
    ControlBudgetError,
    GenerationError,
    OptionError,
    SchemaError,
    StdslError,
    UnspellableError,
)
from stdsl.server.constraints.constraint_cache import UnsupportedSchema
from stdsl.server.openai_api.protocol import ErrorBody, ErrorDetail


class RequestError(StdslError):
    """A request the server refuses: HTTP `status`, the OpenAI error `kind`, the offending `param` and a `code`."""

    def __init__(self, message: str, *, status: int = 400, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error", retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param
        self.code = code
        self.kind = kind
        self.retry_after = retry_after

    def body(self) -> dict[str, object]:
        """The JSON body OpenAI clients read."""
        detail = ErrorDetail(message=str(self), type=self.kind, param=self.param, code=self.code)
        return ErrorBody(error=detail).model_dump()


def overloaded(waiting: int, retry_after: int = 1) -> RequestError:
    """The 429 answer when `waiting` requests already fill the queue."""
    return RequestError(f"the server is busy ({waiting} requests in flight); retry after {retry_after} s",
                        status=429, code="rate_limit_exceeded", kind="rate_limit_error", retry_after=retry_after)


def from_stdsl_error(error: StdslError, param: str | None = None) -> RequestError:
    """The HTTP answer for an error the library raised: a 4xx for anything the request did; a 500 only when
    decoding itself failed (a fault of ours, never of the request)."""
    if isinstance(error, RequestError):
        return error
    if isinstance(error, ContextLengthError):
        return RequestError(str(error), param=error.argument, code="context_length_exceeded")
    if isinstance(error, OptionError):
        return RequestError(str(error), param=error.argument, code="invalid_value")
    if isinstance(error, BudgetError):
        return RequestError(str(error), param="max_tokens", code="max_tokens_too_small")
    if isinstance(error, CompileTimeError):
        return RequestError(str(error), param=param, code="constraint_compile_timeout")
    if isinstance(error, (SchemaError, UnsupportedSchema)):
        return RequestError(str(error), param=param, code="unsupported_schema")
    if isinstance(error, CompileError):
        return RequestError(str(error), param=param, code="invalid_constraint")
    if isinstance(error, UnspellableError):
        return RequestError(str(error), param=param, code="unspellable_constraint")
    if isinstance(error, ControlBudgetError):
        return RequestError(str(error), param=param, code="constraint_too_costly")
    if isinstance(error, GenerationError):
        return RequestError(f"decoding failed: {error}", status=500, kind="server_error", code="generation_failed")
    if isinstance(error, Cancelled):
        return RequestError(str(error), status=499, code="cancelled")
    return RequestError(str(error), param=param, code="invalid_request")
