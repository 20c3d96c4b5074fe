"""A read-only, hashable, picklable mapping for the fields of frozen dataclasses.

A frozen dataclass holding a plain dict is not really frozen (the dict can still be changed) and
is not hashable. ``types.MappingProxyType`` fixes the first but cannot be pickled, and chips
travel to worker processes in sweeps. This small dict subclass does both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NoReturn, TypeVar

K = TypeVar("K")
V = TypeVar("V")


def _key(item: tuple[Any, Any]) -> Any:
    return item[0]


class FrozenMap(dict[K, V]):
    """A dict that refuses every mutation after construction."""

    def __init__(self, items: Mapping[K, V] | Iterable[tuple[K, V]] = ()) -> None:
        super().__init__(items)
        self._hash: int | None = None

    def _readonly(self, *_args: Any, **_kwargs: Any) -> NoReturn:
        raise TypeError("FrozenMap is read-only")

    __setitem__ = _readonly
    __delitem__ = _readonly
    __ior__ = _readonly
    clear = _readonly
    pop = _readonly
    popitem = _readonly
    setdefault = _readonly
    update = _readonly

    def __hash__(self) -> int:  # type: ignore[override]
        if self._hash is None:
            # Sorted by key (keys are unique, so values are never compared).
            self._hash = hash(tuple(sorted(self.items(), key=_key)))
        return self._hash

    def __reduce__(self) -> tuple[type[FrozenMap[K, V]], tuple[dict[K, V]]]:
        # The default dict pickling refills the dict with __setitem__, which is blocked here.
        return (FrozenMap, (dict(self),))

    def __repr__(self) -> str:
        return f"FrozenMap({dict.__repr__(self)})"
