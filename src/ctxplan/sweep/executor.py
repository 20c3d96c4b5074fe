"""How a sweep maps a function over its points. Serial for now; process / Ray executors plug in
behind the same one-method interface."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        """``fn`` applied to every item; results yielded in the order of ``items``."""
        ...


class SerialExecutor:
    """One point after another, in this process (shares in-memory caches between points)."""

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
        for item in items:
            yield fn(item)
