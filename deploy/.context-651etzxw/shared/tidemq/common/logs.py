"""Structured logging (structlog) shared by every service: one line per event, key=value or JSON."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import structlog


def configure_logging(service: str, level: str = "info", fmt: str = "console") -> None:
    import structlog

    numeric = getattr(logging, level.upper(), None)
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    logging.basicConfig(stream=sys.stderr, level=numeric, format="%(message)s", force=True)
    renderer = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.bind_contextvars(service=service)


class _Logger:
    """`structlog.get_logger(name)`, with structlog imported when the logger is first used
    rather than when the module that holds it is imported. Importing structlog costs about
    0.2 s of CPU (its dev module pulls in rich's traceback and pretty printers and pygments),
    which every `tidemq` command and SDK user paid though most never log a line; services
    import it anyway, in configure_logging. Every attribute is structlog's own logger's, so
    what is logged, and how, is unchanged."""

    __slots__ = ("_name", "_logger")

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: Any = None

    def __getattr__(self, attr: str) -> Any:
        if self._logger is None:
            import structlog

            self._logger = structlog.get_logger(self._name)
        return getattr(self._logger, attr)


def get_logger(name: str) -> structlog.stdlib.BoundLogger:
    return _Logger(name)  # type: ignore[return-value]  # structlog's logger, on first use
