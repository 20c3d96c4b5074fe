"""Parallel layout -> per-chip op graph. Prefill emits pass-KV, decode emits pass-Q."""
