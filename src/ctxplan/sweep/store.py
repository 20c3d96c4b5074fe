"""The result store: every evaluation result, persisted in an embedded SQLite file as it finishes.

One row per ``EvalConfig.key()`` (a hash of the full configuration and ``SIM_VERSION``), so a
result is never stored twice and a simulator change never serves stale figures. The row holds
``EvalResult.to_dict()`` as JSON (read back by ``EvalResult.from_dict``) plus a few plain
columns for listing and export.

How it is used: ``ResultStore`` is a ``MutableMapping[str, EvalResult]``, the interface
``solve.EvalCache`` already takes as its store, so ``EvalCache(store=ResultStore(path))`` looks a
configuration up in the file before simulating it (a hit counts as a ``cache_hit``) and writes
every fresh result at once. Each write is its own committed transaction (autocommit), so a
process killed mid-sweep leaves only whole rows behind and loses at most the evaluations in
flight; a rerun picks the rest up from the file.

Concurrency: WAL journal (readers never block the writer) and a busy timeout, so several worker
processes on one machine may read and write the same file. SQLite's WAL needs shared memory, so
the file must be on a local disk, not a network filesystem (docs/benchmarks.md, "Executors").

Where: ``--store FILE``; else ``$CTXPLAN_STORE`` (``off`` turns the store off); else
``$XDG_CACHE_HOME/ctxplan/results.sqlite`` (``~/.cache/ctxplan/results.sqlite``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ctxplan.errors import UserInputError
from ctxplan.evaluate import SIM_VERSION, EvalResult

SCHEMA_VERSION = "1"
ENV_VAR = "CTXPLAN_STORE"
OFF_WORDS = ("off", "none", "no", "0", "false")
BUSY_TIMEOUT_S = 60.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    key            TEXT PRIMARY KEY,   -- EvalConfig.key(): sha256 of config + SIM_VERSION
    sim_version    TEXT NOT NULL,
    created_at     REAL NOT NULL,      -- unix time the row was written
    model          TEXT NOT NULL,
    chip           TEXT NOT NULL,
    cluster        TEXT NOT NULL,
    phase          TEXT NOT NULL,
    context_length INTEGER NOT NULL,
    cp             INTEGER NOT NULL,
    tp             INTEGER NOT NULL,
    batch          INTEGER NOT NULL,
    kv_tier        TEXT NOT NULL,
    latency_s      REAL,               -- TTFT or TPOT; NULL when not simulated
    simulated      INTEGER NOT NULL,
    result         TEXT NOT NULL       -- EvalResult.to_dict() as JSON
);
CREATE INDEX IF NOT EXISTS results_created ON results (created_at);
CREATE INDEX IF NOT EXISTS results_point ON results (model, chip, cluster, context_length);
"""

# The plain columns, in table order (export writes them; list shows some).
COLUMNS = ("key", "sim_version", "created_at", "model", "chip", "cluster", "phase",
           "context_length", "cp", "tp", "batch", "kv_tier", "latency_s", "simulated")


def default_store_path() -> Path | None:
    """Where the store lives when no --store is given (None: turned off by $CTXPLAN_STORE)."""
    env = os.environ.get(ENV_VAR)
    if env is not None and env.strip():
        if env.strip().lower() in OFF_WORDS:
            return None
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "ctxplan" / "results.sqlite"


# ------------------------------------------------------------------ EvalResult <-> JSON


def result_to_json(result: EvalResult) -> str:
    return json.dumps(result.to_dict(), sort_keys=True, allow_nan=True)


def round_trips(result: EvalResult) -> bool:
    """Whether ``result`` comes back from its JSON equal, field by field."""
    back = EvalResult.from_dict(json.loads(result_to_json(result)))
    return all(getattr(back, f.name) == getattr(result, f.name) for f in fields(EvalResult))


# ------------------------------------------------------------------------------ the store


@dataclass(frozen=True)
class StoredRow:
    """One row as listed / exported: the plain columns and the result's JSON."""

    columns: dict[str, Any]
    result: dict[str, Any]


class ResultStore(MutableMapping[str, EvalResult]):
    """EvalResults by ``EvalConfig.key()`` in an SQLite file (see the module docstring).

    Opening creates the file (and its directory) if needed. A row that cannot be read back
    (written by an incompatible ctxplan) counts as missing and is overwritten by the next
    result for its key. Pickles as its path, so worker processes reopen the same file.
    """

    def __init__(self, path: str | Path, *, timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path).expanduser()
        self.timeout_s = timeout_s
        self._memo: dict[str, EvalResult] = {}
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        # Rows written before this moment come from earlier runs (of this or another process):
        # what a user is told when a run reports cache hits it did not simulate itself.
        self.opened_at = time.time()
        self._earlier: set[str] = set()
        self._connect()  # fail now, at the edge, if the path is unusable

    # -- connection ---------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        # A connection must not cross a fork: a child reopens the file.
        self._conn = None
        p = self.path
        if p.is_dir():
            raise UserInputError("store", str(p), "give a file path, not a directory",
                                 "is a directory")
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(p, timeout=self.timeout_s, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # WAL: a commit survives a process kill
            conn.executescript(_SCHEMA)
            row = conn.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
            if row is None:
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
            elif row[0] != SCHEMA_VERSION:
                conn.close()
                raise UserInputError(
                    "store", str(p), "point --store at a new file, or clear this one with "
                    "`ctxplan store clear --yes --store FILE`",
                    f"store schema {row[0]} is not this ctxplan's ({SCHEMA_VERSION})")
        except sqlite3.DatabaseError as exc:
            raise UserInputError("store", str(p), "point --store at a ctxplan results file or "
                                 "a new path (or use --no-store)",
                                 f"not a usable SQLite store ({exc})") from None
        except OSError as exc:
            raise UserInputError("store", str(p), "pick a writable path with --store FILE, or "
                                 "turn the store off with --no-store",
                                 f"cannot create it ({exc.strerror or exc})") from None
        self._conn = conn
        self._pid = os.getpid()
        return conn

    def close(self) -> None:
        if self._conn is not None and self._pid == os.getpid():
            self._conn.close()
        self._conn = None

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        return {"path": str(self.path), "timeout_s": self.timeout_s,
                "opened_at": self.opened_at}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = Path(state["path"])
        self.timeout_s = state["timeout_s"]
        self.opened_at = state.get("opened_at", time.time())   # a worker: the run's start
        self._earlier = set()
        self._memo = {}
        self._conn = None
        self._pid = 0

    def __repr__(self) -> str:
        return f"ResultStore({str(self.path)!r})"

    # -- the mapping --------------------------------------------------------------------

    def get(self, key: str, default: Any = None) -> Any:
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        row = self._connect().execute(
            "SELECT result, created_at FROM results WHERE key = ?", (key,)).fetchone()
        if row is None:
            return default
        try:
            result = EvalResult.from_dict(json.loads(row[0]))
        except (ValueError, KeyError, TypeError):
            return default  # unreadable row: a miss; the fresh result replaces it
        if result.key != key:
            return default
        self._memo[key] = result
        if row[1] < self.opened_at:
            self._earlier.add(key)
        return result

    def from_earlier_run(self, key: str) -> bool:
        """Whether the result of ``key`` read from this store was written before it was opened
        (by an earlier run), rather than by this run."""
        return key in self._earlier

    def __getitem__(self, key: str) -> EvalResult:
        hit = self.get(key)
        if hit is None:
            raise KeyError(key)
        return hit

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def __setitem__(self, key: str, result: EvalResult) -> None:
        self._memo[key] = result
        if not round_trips(result):
            return  # cannot be stored exactly: keep it in this process only (a bug; see tests)
        m = result
        # One statement in autocommit mode: its own transaction, committed before returning.
        self._connect().execute(
            "INSERT OR REPLACE INTO results VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (key, SIM_VERSION, time.time(), m.model, m.chip, m.cluster, m.phase,
             m.context_length, m.cp, m.tp, m.batch, m.kv_tier, m.latency_s, int(m.simulated),
             result_to_json(m)))

    def __delitem__(self, key: str) -> None:
        self._memo.pop(key, None)
        cur = self._connect().execute("DELETE FROM results WHERE key = ?", (key,))
        if cur.rowcount == 0:
            raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        rows = self._connect().execute("SELECT key FROM results ORDER BY key").fetchall()
        return iter([r[0] for r in rows])

    def __len__(self) -> int:
        return int(self._connect().execute("SELECT COUNT(*) FROM results").fetchone()[0])

    # -- beyond the mapping -------------------------------------------------------------

    def matching(self, *, model: str, chip: str, cluster: str,
                 context_length: int) -> dict[str, EvalResult]:
        """Every current-version result of one (model, chip, cluster, S): what a worker that
        cannot open this file (a remote Ray node) needs to reuse the stored points of a solve."""
        rows = self._connect().execute(
            "SELECT key FROM results WHERE model = ? AND chip = ? AND cluster = ? AND "
            "context_length = ? AND sim_version = ?",
            (model, chip, cluster, context_length, SIM_VERSION)).fetchall()
        out = {}
        for (key,) in rows:
            r = self.get(key)
            if r is not None:
                out[key] = r
        return out

    def rows(self, *, limit: int | None = None, newest_first: bool = False) -> list[StoredRow]:
        order = "created_at DESC, key" if newest_first else "created_at, key"
        sql = f"SELECT {', '.join(COLUMNS)}, result FROM results ORDER BY {order}"
        args: tuple[int, ...] = ()
        if limit is not None:
            sql += " LIMIT ?"
            args = (limit,)
        out = []
        for row in self._connect().execute(sql, args):
            cols = dict(zip(COLUMNS, row[:-1], strict=True))
            cols["simulated"] = bool(cols["simulated"])
            try:
                result = json.loads(row[-1])
            except ValueError:
                result = {}
            out.append(StoredRow(cols, result))
        return out

    def count_by_version(self) -> dict[str, int]:
        rows = self._connect().execute(
            "SELECT sim_version, COUNT(*) FROM results GROUP BY sim_version ORDER BY sim_version")
        return {v: int(n) for v, n in rows}

    def clear(self, *, stale_only: bool = False) -> int:  # type: ignore[override]
        """Delete every row (or only those of other simulator versions); returns how many."""
        self._memo.clear()
        conn = self._connect()
        if stale_only:
            cur = conn.execute("DELETE FROM results WHERE sim_version != ?", (SIM_VERSION,))
        else:
            cur = conn.execute("DELETE FROM results")
        n = cur.rowcount
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(n)


StoreLike = ResultStore | str | Path | bool | None


def open_store(store: StoreLike) -> ResultStore | None:
    """The store to use: a ResultStore as is; a path opens that file; True opens the default
    (``default_store_path()``, which $CTXPLAN_STORE=off turns off); None / False: no store."""
    if isinstance(store, ResultStore):
        return store
    if store is None or store is False:
        return None
    if store is True:
        path = default_store_path()
        return None if path is None else ResultStore(path)
    if not str(store).strip():
        raise UserInputError("store", str(store), "give a file path, or --no-store")
    return ResultStore(store)


def store_option(path: str | None, no_store: bool) -> StoreLike:
    """The CLI's ``--store FILE`` / ``--no-store`` as a StoreLike (neither: the default file)."""
    if no_store and path is not None:
        raise UserInputError("store", path, "give --store FILE or --no-store, not both")
    if no_store:
        return False
    return path if path is not None else True


# The CSV export: the plain columns, then these from the result.
_CSV_EXTRA = ("chips", "c_kv_bytes", "mla_mode", "events", "tasks", "layers_simulated")
_CSV_MEMORY = ("per_chip_bytes", "capacity_bytes", "fits")


def export_rows(rows: list[StoredRow], kind: str) -> str:
    """``jsonl``: one object per row ({key, sim_version, created_at, result}); ``csv``: one
    flat line per row."""
    if kind == "jsonl":
        return "".join(json.dumps({"key": r.columns["key"],
                                   "sim_version": r.columns["sim_version"],
                                   "created_at": r.columns["created_at"], "result": r.result},
                                  sort_keys=True) + "\n" for r in rows)
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*COLUMNS, *_CSV_EXTRA, *_CSV_MEMORY])
    for r in rows:
        mem = r.result.get("memory") or {}
        values = [*(r.columns[c] for c in COLUMNS), *(r.result.get(c) for c in _CSV_EXTRA),
                  *(mem.get(c) for c in _CSV_MEMORY)]
        w.writerow(["" if v is None else v for v in values])
    return buf.getvalue()
