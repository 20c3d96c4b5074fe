"""One line on stderr while numba compiles the kernel, and one with how long it took.

The compiled kernel (:mod:`ctxplan.sim.compiled`, :mod:`ctxplan.sim.critical`) is compiled the
first time it runs on a machine (or after numba or the kernel's source changes) and cached on
disk (``cache=True``); every later process only loads it. That first compilation takes tens of
seconds, and a command that printed nothing meanwhile looked hung (issue 24). So the code that
calls the compiled functions runs inside :func:`compile_notice`, which listens to numba's own
``numba:compile`` events (``numba.core.event``): numba fires one only when it really compiles,
never when it loads the cached machine code, so a warm cache prints nothing.

The lines go to stderr (on a terminal or not: a log, a pipe, a worker process), never stdout:
tables and ``--json`` stay as they are. A block that compiles several functions (an evaluation
compiles the kernel, the successor lists and the critical path walk) prints one pair of lines,
the second with the compilation time summed over them. Nested blocks print only at the
outermost one. Imports nothing from ctxplan; numba only when a block is entered.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

# The lines, one place: tests and docs/benchmarks.md quote them.
STARTING = ("ctxplan: compiling the simulation kernel with numba (once per machine; "
            "about 10-20 s; later runs load it from numba's cache)...")
DONE = "ctxplan: simulation kernel compiled in {seconds:.1f} s"


class _State:
    """The process's notice: how deep the blocks and numba's compilations are nested, and the
    compilation time of the outermost block so far."""

    def __init__(self) -> None:
        self.blocks = 0
        self.compiles = 0
        self.started = 0.0
        self.seconds = 0.0
        self.announced = False
        self.stream: TextIO | None = None
        self.listener: Any = None


_STATE = _State()


def _write(line: str) -> None:
    stream = _STATE.stream if _STATE.stream is not None else sys.stderr
    stream.write(line + "\n")
    stream.flush()


def _make_listener() -> Any:
    from numba.core import event

    class _Listener(event.Listener):
        """numba:compile events: the outermost one (a function's, not the helpers it inlines)
        starts and stops the clock."""

        def on_start(self, ev: Any) -> None:
            if _STATE.compiles == 0:
                if not _STATE.announced:
                    _write(STARTING)
                    _STATE.announced = True
                _STATE.started = time.perf_counter()
            _STATE.compiles += 1

        def on_end(self, ev: Any) -> None:
            _STATE.compiles -= 1
            if _STATE.compiles == 0:
                _STATE.seconds += time.perf_counter() - _STATE.started

    return _Listener()


@contextmanager
def compile_notice(stream: TextIO | None = None) -> Iterator[None]:
    """Announce numba's compilations inside the block on ``stream`` (stderr by default): the
    first line when the first compilation starts, the time when the block ends. Silent when
    nothing is compiled (a warm cache)."""
    outermost = _STATE.blocks == 0
    if outermost:
        _STATE.stream = stream
        _STATE.seconds = 0.0
        _STATE.announced = False
        _STATE.compiles = 0
    # Listen from the first block entered once numba is loaded: an outer block (an evaluation)
    # does not load numba itself (a point that does not fit simulates nothing); the blocks
    # around the compiled calls are entered after their module has loaded it.
    if _STATE.listener is None and "numba" in sys.modules:
        from numba.core import event
        _STATE.listener = _make_listener()
        event.register("numba:compile", _STATE.listener)
    _STATE.blocks += 1
    try:
        yield
    finally:
        _STATE.blocks -= 1
        if outermost:
            if _STATE.listener is not None:
                from numba.core import event
                event.unregister("numba:compile", _STATE.listener)
                _STATE.listener = None
            if _STATE.announced:
                _write(DONE.format(seconds=_STATE.seconds))
            _STATE.stream = None


__all__ = ["DONE", "STARTING", "compile_notice"]
