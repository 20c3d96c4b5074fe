"""The simulator's version: part of every cache and result-store key (``EvalConfig.key``).

Bump ``SIM_VERSION`` whenever a change alters a simulated figure, and say in its history what
changed: results stored under another version are then simulated again, never mixed in.
"""

from __future__ import annotations

SIM_VERSION = "13"  # 2: elementwise traffic (issue 5); 3: full simulation by default (issue 10);
                   # 4: per-operation costs of collectives, Meta's pass-Q, per-kernel overhead,
                   #    absorbed MLA's kv_b weights (issue 12 stage 2);
                   # 5: attention kinds in prefill, cached prefix and prefill rings, DSA indexer
                   #    replicated over TP (issues 15 / 16);
                   # 6: the KV handoff per attention kind (windows and states to the homes,
                   #    from the prefill's placement; a linear state after its chain);
                   # 7: all-to-alls with a window of peers in flight per rank;
                   # 8: what small operations cost (issue 26): per-class kernel floors, the
                   #    launch gap (decode under CUDA graphs) and the host's issue time (prefill
                   #    eager), GEMM tile padding / depth / small-M loss by the chip's balance,
                   #    partial overlap, attention Q-tile padding, unmasked blocks, head dim;
                   #    the kernels a layer launches (fused GEMMs by input, MLA's latent norms,
                   #    RoPE, the KV-cache write, top-k, permute / unpermute, grouped-GEMM
                   #    experts, SwiGLU and quantisation as kernels); experts touched under
                   #    random routing; FP8 dispatch; all-reduce by size (ring, one-shot,
                   #    two-shot); dispatch / combine floors; refitted h100-gt500 GEMM ceiling
                   #    and NVLink hop;
                   # 9: all-reduce across hosts by algorithm (issue 26 item 4): the hierarchical
                   #    all-reduce (ring in each host, per-rail ring between hosts) where its
                   #    estimate beats the flat ring
                   # 10: memory from the simulated schedule (the buffers each emitter
                   #    declares, their peak per chip decides fits); chunked prefill
                   #    (prefill_chunk, default auto: chunks only when one pass does not fit)
                   # 11: the kernel model refitted without DeepGEMM's L2-warm README rows
                   #    (issue 26): GEMM ceiling / balance / small-M half / depth / overlap,
                   #    the GEMM and elementwise floors; h100-gt500's GEMM ceiling refitted
                   # 12: the decode pool of a handoff on hosts of its own (issue 25 item 4):
                   #    it starts on the first chip of the host after the prefill pool's
                   #    (colocate_pools packs it right after, as before)
                   # 13: a MoE dispatch's leftover slots (fewer than the pool's chips) go to
                   #    chips spread over the pool, not the sender's neighbours (layout.py
                   #    route_matrix); DP attention (dp, issue 25 item 1)
