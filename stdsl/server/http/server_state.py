"""What the HTTP handlers share (`ServerState`): the model and its engine, the constraint cache, metrics, limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stdsl.server.constraints.constraint_cache import ConstraintCache
from stdsl.server.http.limits import ClientLedger, Limits
from stdsl.server.http.metrics import Metrics
from stdsl.server.openai_api.errors import RequestError
from stdsl.server.requests.chat_render import CallMemory


@dataclass
class ServerState:
    """What the handlers share: the model and its engine, the constraint cache, metrics and limits."""

    model: Any
    engine: Any
    cache: ConstraintCache
    model_name: str
    api_key: str | None = None
    max_queue: int = 64
    metrics: Metrics = field(default_factory=Metrics)
    memory: CallMemory = field(default_factory=CallMemory)
    tool_format: str | None = None
    program_dir: str | None = None
    steps_programs: dict[str, Any] = field(default_factory=dict)
    in_flight: int = 0
    limits: Limits = field(default_factory=Limits)
    aliases: tuple[str, ...] = ()
    clients: ClientLedger = field(init=False)

    def __post_init__(self) -> None:
        self.clients = ClientLedger(self.limits)

    def check_model(self, name: str | None) -> None:
        """A 404 unless `name` (when given) is the served model's name or one of its aliases."""
        if name is not None and name != self.model_name and name not in self.aliases:
            served = ", ".join(repr(n) for n in (self.model_name, *self.aliases))
            shown = name.encode("utf-8", "backslashreplace").decode("utf-8")[:200]
            raise RequestError(f"the model {shown!r} does not exist; this server serves {served}", status=404,
                               param="model", code="model_not_found")

    @property
    def capacity(self) -> int:
        """Requests admitted at once before the server answers 429."""
        return int(self.engine.max_rows) + self.max_queue
