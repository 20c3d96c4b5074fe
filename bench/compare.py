"""Compare this checkout with commit REV on the benchmark set, in one run on one machine.

    python bench/compare.py 7edcc5b                      # every case, best of 3
    python bench/compare.py 7edcc5b --cases help,solve-1m --repeat 5
    python bench/compare.py main --rev-dir /tmp/ctxplan-main   # an existing checkout of REV

Absolute times differ 2-3x between machines (issue 24); the ratio of two commits measured in
one run on one machine is the figure that travels. So this script

* checks REV out with ``git worktree add --detach`` into a temporary directory (removed at the
  end; ``--rev-dir DIR`` uses a checkout you already have and leaves it alone);
* runs both sides with the Python running this script and ``PYTHONPATH=<side>/src``: one venv,
  the same numpy, numba, typer for both, so only ctxplan's code differs (a REV whose
  dependencies this venv lacks fails its runs, and the table says so);
* first runs one small evaluation per side, untimed, so that numba compiles each side's kernel
  into its own cache before anything is timed (the first run of a fresh checkout compiles);
* runs every case as ``python -m ctxplan.cli ARGS`` in a fresh process (interpreter start and
  imports included: what a user waits for), with the result store off, interleaving the two
  sides (this, REV, then REV, this in the next round, ...) so a change of the machine's load
  falls on both;
* prints, per case, the best and median wall time and the peak RSS of each side, the ratio
  REV / this (above 1: this checkout is faster), each side's answer (a TTFT or a chip count:
  a ratio between two different answers compares different work), the CPU model
  (/proc/cpuinfo) and the load average before and after.

The pure parts (arguments, the CPU model, the summary, the table) are tested in
tests/bench/test_compare.py; docs/benchmarks.md, "Comparing two commits", shows a run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

_DS = ["--model", "deepseek-v3", "--chip", "sg2262"]


@dataclass(frozen=True)
class Case:
    """One benchmark: the CLI's arguments and the JSON field that holds its answer."""

    key: str
    title: str
    args: tuple[str, ...]
    answer: str = ""   # a top-level field of the --json output ("" when there is none); a
                       # list of points gives their total_chips ("18,28,42,89")


CASES: tuple[Case, ...] = (
    Case("help", "ctxplan --help", ("--help",)),
    Case("eval-1m-128", "1M prefill Np = 128, full simulation",
         ("eval", *_DS, "--context", "1M", "--phase", "prefill", "--cp", "128", "--json",
          "--no-store"), "ttft_s"),
    Case("solve-1m", "solve 1M (default: TPOT only)",
         ("solve", *_DS, "--context", "1M", "--json", "--no-store"), "total_chips"),
    Case("solve-128k", "solve 128K --ttft-max 10s",
         ("solve", *_DS, "--context", "128K", "--ttft-max", "10s", "--json", "--no-store"),
         "total_chips"),
    Case("solve-1m-ttft", "solve 1M --ttft-max 60s (TP searched)",
         ("solve", *_DS, "--context", "1M", "--ttft-max", "60s", "--json", "--no-store"),
         "total_chips"),
    Case("capacity", "capacity 128K at 0.05, 0.1, 0.2, 0.5/s --ttft-max 60s",
         ("capacity", *_DS, "--contexts", "128K", "--rates", "0.05/s,0.1/s,0.2/s,0.5/s",
          "--ttft-max", "60s", "--json", "--no-store"), "points"),
)
_BY_KEY = {c.key: c for c in CASES}

# Untimed, per side: numba compiles (or loads) that side's kernel here.
WARM_UP = ("eval", "--model", "llama3.1-8b", "--chip", "h100-sxm", "--context", "1K",
           "--phase", "decode", "--cp", "1", "--json", "--no-store")


# ---------------------------------------------------------------------------------------------
# Pure parts (tested)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="bench/compare.py", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="cases: " + ", ".join(f"{c.key} ({c.title})" for c in CASES))
    ap.add_argument("rev", help="the commit to compare with (anything `git rev-parse` takes)")
    ap.add_argument("--cases", type=_case_list, default=list(CASES),
                    help="comma-separated case keys (default: all, in the order listed below)")
    ap.add_argument("--repeat", type=_positive, default=3,
                    help="runs per case and side; the table gives the best and the median "
                         "(default 3)")
    ap.add_argument("--rev-dir", type=Path, default=None,
                    help="an existing checkout of REV to use (its src/ is put on PYTHONPATH) "
                         "instead of a temporary git worktree")
    ap.add_argument("--timeout", type=float, default=900.0,
                    help="seconds one run may take before it is stopped (default 900)")
    ap.add_argument("--json", action="store_true",
                    help="print the measurements as JSON instead of the table")
    return ap.parse_args(argv)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return value


def _case_list(text: str) -> list[Case]:
    keys = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in keys if k not in _BY_KEY]
    if unknown or not keys:
        raise argparse.ArgumentTypeError(
            f"unknown case {', '.join(unknown) or repr(text)}; use some of "
            f"{', '.join(_BY_KEY)}")
    return [_BY_KEY[k] for k in dict.fromkeys(keys)]


def cpu_model(cpuinfo: str) -> str:
    """The CPU's model name from /proc/cpuinfo's text (x86 'model name'; ARM 'Processor' or
    'CPU part'), else 'unknown'."""
    for wanted in ("model name", "processor", "hardware", "cpu part"):
        for line in cpuinfo.splitlines():
            name, sep, value = line.partition(":")
            if sep and name.strip().lower() == wanted and value.strip() \
                    and not value.strip().isdigit():
                return value.strip()
    return "unknown"


@dataclass
class Runs:
    """One side's runs of one case."""

    seconds: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    error: str = ""

    def best(self) -> float | None:
        return min(self.seconds) if self.seconds else None

    def median(self) -> float | None:
        return statistics.median(self.seconds) if self.seconds else None

    def peak_mb(self) -> float | None:
        return max(self.rss_mb) if self.rss_mb else None

    def answer(self) -> str:
        """The answer its runs gave ('a | b' if they disagreed: the simulator is meant to be
        deterministic, so that is worth seeing)."""
        return " | ".join(dict.fromkeys(self.answers)) or "-"


def ratio(rev: float | None, this: float | None) -> float | None:
    """REV's time over this checkout's: above 1, this checkout is faster."""
    if rev is None or this is None or this <= 0:
        return None
    return rev / this


def _s(x: float | None) -> str:
    return "-" if x is None else (f"{x:.3f}" if x < 10 else f"{x:.2f}")


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _mb(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def ratio_table(rows: Sequence[tuple[Case, Runs, Runs]], this_name: str, rev_name: str) -> str:
    """The comparison as text: per case each side's best and median seconds, peak RSS and
    answer, and the ratios REV / this of the best and of the median times."""
    head = ["case", f"{this_name} best s", "median s", "MB", f"{rev_name} best s", "median s",
            "MB", "ratio best", "ratio median", "answer (this / rev)"]
    body = []
    for case, this, rev in rows:
        answers = this.answer() if this.answer() == rev.answer() else \
            f"{this.answer()} / {rev.answer()}"
        body.append([case.title, _s(this.best()), _s(this.median()), _mb(this.peak_mb()),
                     _s(rev.best()), _s(rev.median()), _mb(rev.peak_mb()),
                     _x(ratio(rev.best(), this.best())),
                     _x(ratio(rev.median(), this.median())), answers])
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    lines = []
    for r in [head, *body]:
        cells = [r[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(r[1:-1], widths[1:-1],
                                                                     strict=True)), r[-1]]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "-" * len(lines[0]))
    notes = [f"{case.title}: {side} failed: {runs.error}"
             for case, this, rev in rows
             for side, runs in ((this_name, this), (rev_name, rev)) if runs.error]
    lines.append("ratio = REV's time / this checkout's (above 1: this checkout is faster)")
    return "\n".join(lines + notes)


def answer_of(case: Case, stdout: str) -> str:
    """The case's answer from its --json output ('' when it has none or it is not JSON)."""
    if not case.answer:
        return ""
    try:
        value = json.loads(stdout).get(case.answer)
    except (ValueError, AttributeError):
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        return ",".join(str(p.get("total_chips")) if isinstance(p, dict) else str(p)
                        for p in value)
    return str(value)


# ---------------------------------------------------------------------------------------------
# Running


@dataclass(frozen=True)
class Side:
    name: str
    src: Path


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def _this_name() -> str:
    sha = _git("rev-parse", "--short", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return f"this {sha}{'+changes' if dirty else ''}"


def _run(side: Side, args: Sequence[str], timeout: float, cwd: Path
         ) -> tuple[float, float, int, str, str]:
    """``python -m ctxplan.cli ARGS`` with the side's src first on the path: (wall s, peak
    RSS MB, exit code, stdout, stderr). Output goes to files (no pipe to fill), and the
    child's own peak RSS comes from wait4."""
    env = dict(os.environ, PYTHONPATH=str(side.src), CTXPLAN_STORE="off")
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "ctxplan.cli", *args], env=env,
                                cwd=cwd, stdout=out, stderr=err, text=True)
        deadline = t0 + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.005)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return wall, usage.ru_maxrss / 1024, proc.returncode, out.read(), err.read()


def _first_line(text: str) -> str:
    return next((line for line in text.splitlines() if line.strip()), "")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def measure(cases: Sequence[Case], sides: Sequence[Side], repeat: int, timeout: float,
            cwd: Path, log: Any = sys.stderr) -> dict[str, dict[str, Runs]]:
    out: dict[str, dict[str, Runs]] = {c.key: {s.name: Runs() for s in sides} for c in cases}
    for side in sides:
        wall, _, code, _, err = _run(side, WARM_UP, timeout, cwd)
        print(f"warm-up {side.name}: {wall:.1f} s (numba compiles here if its cache is cold)"
              + ("" if code == 0 else f"; FAILED: {_first_line(err)}"), file=log, flush=True)
    for round_ in range(repeat):
        order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
        for case in cases:
            for side in order:
                runs = out[case.key][side.name]
                if runs.error:
                    continue
                wall, mb, code, stdout, stderr = _run(side, case.args, timeout, cwd)
                if code != 0:
                    runs.error = (f"exit {code}: {_first_line(stderr)}"
                                  if code > 0 else f"stopped after {timeout:.0f} s")
                    continue
                runs.seconds.append(wall)
                runs.rss_mb.append(mb)
                runs.answers.append(answer_of(case, stdout))
                print(f"round {round_ + 1}/{repeat} {case.key:14s} {side.name}: {wall:.3f} s",
                      file=log, flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    opts = parse_args(argv)
    try:
        rev_sha = _git("rev-parse", "--verify", "--short", f"{opts.rev}^{{commit}}")
    except subprocess.CalledProcessError:
        print(f"error: REV = {opts.rev!r}: not a commit of {REPO}. Fix: give a commit, "
              "branch or tag `git rev-parse` knows", file=sys.stderr)
        sys.exit(2)
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    with tempfile.TemporaryDirectory(prefix="ctxplan-compare-") as tmp:
        tmpdir = Path(tmp)
        made = opts.rev_dir is None
        rev_dir = tmpdir / f"rev-{rev_sha}" if made else opts.rev_dir.resolve()
        if made:
            _git("worktree", "add", "--detach", str(rev_dir), rev_sha)
        try:
            sides = [Side(_this_name(), REPO / "src"), Side(f"REV {rev_sha}", rev_dir / "src")]
            load_before = _load()
            t0 = time.perf_counter()
            runs = measure(opts.cases, sides, opts.repeat, opts.timeout, tmpdir)
            total = time.perf_counter() - t0
            load_after = _load()
        finally:
            if made:
                _git("worktree", "remove", "--force", str(rev_dir))
                shutil.rmtree(rev_dir, ignore_errors=True)
    facts = {
        "cpu": cpu_model(cpuinfo), "cores": os.cpu_count(),
        "load_before": load_before, "load_after": load_after,
        "python": platform.python_version(), "repeat": opts.repeat,
        "rev_dir": None if made else str(rev_dir), "wall_s": round(total, 1),
    }
    rows = [(c, runs[c.key][sides[0].name], runs[c.key][sides[1].name]) for c in opts.cases]
    if opts.json:
        print(json.dumps({**facts, "this": sides[0].name, "rev": sides[1].name, "cases": [
            {"case": c.key, "this": vars(a), "rev": vars(b),
             "ratio_best": ratio(b.best(), a.best()),
             "ratio_median": ratio(b.median(), a.median())} for c, a, b in rows]}, indent=2))
        return
    print(f"CPU {facts['cpu']}, {facts['cores']} cores; load average {load_before} before, "
          f"{load_after} after; Python {facts['python']}; best and median of {opts.repeat} "
          f"runs per side, interleaved; {total:.0f} s in all")
    print(ratio_table(rows, "this", "REV"))
    print(f"this = {sides[0].name.removeprefix('this ')} ({REPO}), REV = "
          f"{sides[1].name.removeprefix('REV ')}; each side run as "
          f"`{Path(sys.executable).name} -m ctxplan.cli` with PYTHONPATH=<side>/src")


if __name__ == "__main__":
    main()
