"""Candidate sets of CP degrees N for one pool: all integers, whole groups, powers of two.

N counts CP ranks; a rank is a TP group of ``tp`` chips, so the pool has N * tp chips.
"group" keeps the N whose chips fill whole groups of ``group_size`` chips (N * tp a multiple of
it: whole boards / hosts), so no rank straddles a half-used board.
"""

from __future__ import annotations

from ctxplan.errors import UserInputError, did_you_mean

CANDIDATE_SETS = ("all", "group", "pow2")


def check_candidate_set(kind: str) -> str:
    if kind not in CANDIDATE_SETS:
        raise UserInputError("candidates", kind, f"{did_you_mean(kind, CANDIDATE_SETS)}use one "
                             f"of {', '.join(CANDIDATE_SETS)}")
    return kind


def candidate_ns(kind: str, bound_n: int, tp: int = 1, group_size: int = 1) -> list[int]:
    """The candidate N in [1, bound_n], ascending."""
    check_candidate_set(kind)
    if kind == "all":
        return list(range(1, bound_n + 1))
    if kind == "pow2":
        out, n = [], 1
        while n <= bound_n:
            out.append(n)
            n *= 2
        return out
    return [n for n in range(1, bound_n + 1) if (n * tp) % group_size == 0]
