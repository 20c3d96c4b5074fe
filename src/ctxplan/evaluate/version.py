"""The simulator's version: part of every cache and result-store key (``EvalConfig.key``).

Bump ``SIM_VERSION`` whenever a change alters a simulated figure, and say in its history what
changed: results stored under another version are then simulated again, never mixed in.
"""

from __future__ import annotations

SIM_VERSION = "8"  # 2: elementwise traffic (issue 5); 3: full simulation by default (issue 10);
                   # 4: per-operation costs of collectives, Meta's pass-Q, per-kernel overhead,
                   #    absorbed MLA's kv_b weights (issue 12 stage 2);
                   # 5: attention kinds in prefill, cached prefix and prefill rings, DSA indexer
                   #    replicated over TP (issues 15 / 16);
                   # 6: the KV handoff per attention kind (windows and states to the homes,
                   #    from the prefill's placement; a linear state after its chain);
                   # 7: all-to-alls with a window of peers in flight per rank
                   # 8: the matmul shape factor written 1 / (1 + min(m, half) / m), monotone
                   #    after rounding (issue 21): an efficiency may move by an ulp, so a
                   #    duration by a nanosecond
