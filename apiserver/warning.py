"""Warnings for the response to the request being served (k8s.io/apiserver/pkg/warning):
admission adds them while it decides, the handler sends them as `Warning:` headers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_recorded: ContextVar[list[str] | None] = ContextVar("kubelite_warnings", default=None)


def add_warning(text: str) -> None:
    """Record one warning; outside a request (a test calling the registry) it is dropped."""
    recorded = _recorded.get()
    if recorded is not None and text not in recorded:
        recorded.append(text)


@contextmanager
def recording() -> Iterator[list[str]]:
    recorded: list[str] = []
    token = _recorded.set(recorded)
    try:
        yield recorded
    finally:
        _recorded.reset(token)
