"""The defaults every front end starts from, written once (command line, app, planner).

A value a user does not give is taken from here, so ``mlacalc plan`` and the app's
planner size the same deployment, and a report in the terminal matches the page.
This module imports nothing.
"""

from __future__ import annotations

__all__ = [
    "APP_BATCH",
    "BATCH",
    "COMPARE_SEQ_LEN",
    "CONCURRENCY_SNAP",
    "DTYPE",
    "EP",
    "GPUS",
    "HARDWARE",
    "ISL",
    "KV_DTYPE",
    "MEMORY_RESERVE",
    "MODE",
    "MODEL",
    "OSL",
    "PAGE_SIZE",
    "ROOFLINE_PHASE",
    "ROOFLINE_SEQ_LEN",
    "SCOPE",
    "SEQ_LEN",
    "TPOT_TARGET_S",
    "TTFT_TARGET_S",
]

#: Model the app opens on.
MODEL = "deepseek-v3"
#: Device the app opens on.
HARDWARE = "H200"
#: Tokens in the cache (``report``, ``plan``, the app): 128K.
SEQ_LEN = 131072
#: Context of ``compare`` and of ``roofline``: 32K.
COMPARE_SEQ_LEN = 32768
ROOFLINE_SEQ_LEN = 32768
#: Sequences in the batch for one-model reports (``report``, ``compare``, ``roofline``).
BATCH = 1
#: Batch the app opens on: a serving batch, so the planner and roofline have work to show.
APP_BATCH = 8
#: KV-cache dtype and compute dtype.
KV_DTYPE = "bf16"
DTYPE = "bf16"
#: Phase of ``roofline`` (the decode step is what serving repeats).
ROOFLINE_PHASE = "decode"
#: Roofline mode and scope: ideal fused kernels, one attention layer.
MODE = "fused"
SCOPE = "attention_layer"
#: Planner: GPUs in all, expert-parallel degree, tokens per KV page (the block size of
#: paged-attention servers), fraction of each GPU's memory kept for activations and workspace.
GPUS = 8
EP = 1
PAGE_SIZE = 16
MEMORY_RESERVE = 0.1
#: The app planner's request mix (tokens in and out per request) and its latency targets: the
#: requests in flight default to the most that meet both targets, not to as many as fit.
ISL = 2000
OSL = 500
TTFT_TARGET_S = 2.0
TPOT_TARGET_S = 0.05
#: Chunked-prefill token budgets a search also runs its aggregated points at: SGLang's and
#: vLLM's default (8,192) and one budget each side of it.
SEARCH_CHUNKS = (2048, 8192, 16384)
#: Running sequences per attention group a search tries (refined near its best, and past the
#: largest up to twice it where the best is there).
SEARCH_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
#: A disaggregated plan reads a concurrency within this fraction of a whole decode batch's
#: requests in flight as that batch's, so a search point's concurrency (such a count, a long
#: float) printed rounded to within a quarter of it reproduces the point exactly.
CONCURRENCY_SNAP = 1e-4
