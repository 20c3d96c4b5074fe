"""DeepSeek-V4's caches on a pool (mapping/compressed_memory.py): what the ranks hold adds up
to what the model keeps, placed as the engines place it."""

from __future__ import annotations

import pytest

from ctxplan import api
from ctxplan.config.model_presets import load_model
from ctxplan.evaluate import check_memory
from ctxplan.mapping.memory import kv_bytes_by_rank
from ctxplan.model import compressed as c
from ctxplan.model.kv import kv_bytes_per_sequence

PRO = load_model("deepseek-v4-pro")


@pytest.mark.parametrize(("cp", "batch", "context"), [(1, 1, 2**20), (4, 3, 100_003),
                                                       (8, 2, 131072), (5, 7, 50)])
def test_decode_shards_the_entries_and_keeps_windows_and_states_at_home(
        cp: int, batch: int, context: int) -> None:
    lay = api.eval_config(PRO, "gb300", context, "decode", cp, tp=8, batch=batch).layout()
    by_rank = kv_bytes_by_rank(PRO, lay)
    assert sum(by_rank) == batch * kv_bytes_per_sequence(PRO, context, lay.c_kv_bytes)
    # the entries split evenly (at most one entry per layer more on a rank), the homes of the
    # sequences differ by at most one sequence's windows and states
    home = sum(n * (c.window_tokens(PRO, context) * 584 + c.compressor_state_bytes(PRO, k))
               for k, n in PRO.layer_type_counts.items())
    one_entry = 30 * 716 + 31 * 584
    assert max(by_rank) - min(by_rank) <= home + batch * one_entry


def test_prefill_ranks_hold_their_own_entries_and_one_layers_gathered_sequence() -> None:
    S, cp = 2**20, 8
    lay = api.eval_config(PRO, "gb300", S, "prefill", cp, tp=8).layout()
    by_rank = kv_bytes_by_rank(PRO, lay)
    states = sum(n * c.compressor_state_bytes(PRO, k) for k, n in PRO.layer_type_counts.items())
    gathered = c.compressed_entries(PRO, "compressed_sparse_attention", S) * 716
    halo = 2 * 128 * 584
    # CSA's transient is the largest: its gathered entries (every rank completes as many), the
    # windows' keys and the compressor rows of the 4 tokens before each chunk but the first
    # (2 x 2 x (512 + 128) BF16 values a token)
    rows = [(4 if i == 0 else 8) * 2 * 2 * (512 + 128) * 2 for i in range(cp)]
    own = [b - states - gathered - halo - rows[i] for i, b in enumerate(by_rank)]
    # every complete entry and the sequence's last 128 tokens are held once, on some rank
    growth = sum(n * c.compressed_entries(PRO, k, S) * c.stored_entry_bytes(PRO, k, 716)
                 for k, n in PRO.layer_type_counts.items())
    assert sum(own) == growth + 61 * 128 * 584


def test_v4_pro_fits_where_the_engines_serve_it() -> None:
    # 1M-token decode on one GB300 NVL72 rack (8 ranks of TP8): weights ~862 GB over 64 GPUs
    m = check_memory(api.eval_config("deepseek-v4-pro", "gb300", "1M", "decode", 8, tp=8))
    assert m.fits and m.kv_bytes < 1e9
    # one 8-GPU H20 host cannot hold the weights
    assert not check_memory(api.eval_config("deepseek-v4-pro", "h20-96", "128K", "decode", 1,
                                            tp=8)).fits
