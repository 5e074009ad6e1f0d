"""The kernel classes of the time model: their parameters, and the one function that turns a
batch of kernels into seconds (:func:`kernel_terms`).

A kernel's time on a device is

    fixed + combine(compute, memory) + extra work a roofline has no term for

- ``compute`` = FLOPs at ``eff_compute`` of the dense tensor rate of its dtype, in whole waves
  of work units (output tiles, attention units) over the SMs;
- ``memory`` = HBM bytes at ``eff_memory`` of the datasheet bandwidth, limited when a kernel
  has too few work units to draw the whole bandwidth; operands a warm replay keeps in the L2
  are read at ``l2_speedup`` times the HBM bandwidth;
- ``combine`` is the p-norm ``(c^p + m^p)^(1/p)`` with ``p = overlap``;
- the extra work and the terms of each kind are its module's: :mod:`.gemm_time`,
  :mod:`.attention_time` (prefill and decode), :mod:`.mla_time`, :mod:`.moe_time`,
  :mod:`.comm_time` (collectives: link time, no compute), :mod:`.elementwise_time`
  (element-wise and quantize kernels); the plain roofline bound is :mod:`.roofline_time`;
- a kernel timed outside a CUDA graph (``plugin = 1``) adds :data:`UNGRAPHED_LAUNCH_S`.

Every parameter is a fraction or multiple of a datasheet figure, or a time of work on the SMs
stated at a reference clock (cycles, scaled by the device's clock; of a collective, its fixed
cost, per-step synchronisation and per-step wait), or, for the waits both measured devices
show equal whatever their clocks, seconds; so a profile fitted on measured devices transfers.
Why each term is there, with the figures, is in docs/decisions.md ("Time model").
"""

from __future__ import annotations

import numpy as np

from mlacalc.timemodel.attention_time import call_fixed_s, decode_terms, prefill_terms
from mlacalc.timemodel.comm_time import collective_terms
from mlacalc.timemodel.device import DeviceFigures
from mlacalc.timemodel.elementwise_time import streaming_terms
from mlacalc.timemodel.gemm_time import gemm_terms
from mlacalc.timemodel.mla_time import mla_decode_terms
from mlacalc.timemodel.moe_time import moe_terms
from mlacalc.timemodel.shared import REFERENCE_CLOCK_HZ, REFERENCE_LINK_LATENCY_S, col, combine
from mlacalc.words.kernels import COMM_KINDS, KernelBatch

__all__ = [
    "DEFAULTS",
    "FIT_PARAMS",
    "PARAMS",
    "REFERENCE_CLOCK_HZ",
    "UNGRAPHED_LAUNCH_S",
    "borrowed_params",
    "class_key",
    "default_params",
    "fit_params",
    "kernel_terms",
    "scale_params",
]


#: The clocked parameters: times of work done on the SMs (fixed costs, per-unit and per-block
#: work, the fixed cost of quantizing), stated at :data:`REFERENCE_CLOCK_HZ` and scaled with
#: ``REFERENCE_CLOCK_HZ / clock`` of the device.
CLOCKED = (
    "fixed_s",
    "node_s",
    "block_s",
    "seq_s",
    "quant_fixed_s",
    "mask_s",
    "local_unit_s",
    "dequant_s",
    "tile_s",
    "route_s",
    "select_s",
    "expert_s",
    "ep_map_s",
    "ep_row_s",
    "token_s",
    "row_s",
    "sort_s",
    "sort_pair_s",
    "hidden_s",
    "launch_s",
    "merge_s",
    "wave_s",
    "token_row_s",
    "mmha_s",
    "narrow_head_s",
    "mmha_block_s",
    "mmha_hidden_s",
    "amax_block_s",
)
#: The clocked terms of a collective: its fixed cost (its kernel's launch, the flag handshakes
#: of its protocol), its bulk copies' synchronisation per step and its per-step wait
#: (``latency_steps`` link latencies). A step ends when the SMs polling a flag see a peer's
#: write land: the datasheet link latency (one figure for NVLink 3 and 4, measured at a Hopper
#: clock) stated in cycles of the SMs that poll and answer it.
COMM_CLOCKED = ("fixed_s", "proto_s", "latency_steps")
#: The terms of a collective that are flag round trips over the scale-up fabric beside their
#: cycles: its fixed cost and its bulk copies' synchronisation per step, stated at
#: :data:`~mlacalc.timemodel.shared.REFERENCE_LINK_LATENCY_S` and scaled with the device's
#: link latency (its per-step wait, ``latency_steps``, is already in link latencies). The
#: smallest calls take 1.60x as long on B200 as on H100 in every engine's CUDA-graph custom
#: all-reduce (1.46x in NCCL's, launched from the host) where the clocks differ by 1.4%.
COMM_ROUND_TRIPS = ("fixed_s", "proto_s")
#: Collective variants launched from the host, one call at a time (SGLang's and vLLM's eager
#: custom all-reduce): their fixed cost is the host's launch and input copy (about 30 us on
#: H100 and B200 alike), not the fabric's round trips; it stays a time at the reference clock.
HOST_LAUNCHED = ("eager",)

#: Launch latency of a kernel timed outside a CUDA graph (a TensorRT plugin layer timed by the
#: engine's profiler, ``plugin = 1``): the host launch a graph replay removes and the fitted
#: fixed costs, all taken from graph replays, leave out. The same 5 us per launch the unfused
#: mode assumes without a measured figure
#: (:data:`mlacalc.timemodel.roofline_time.DEFAULT_LAUNCH_S`).
UNGRAPHED_LAUNCH_S = 5e-6

PARAMS: dict[str, tuple[float, float, str]] = {
    "eff_compute": (0.02, 1.0, "fraction of the dense tensor rate at full occupancy"),
    "eff_memory": (0.05, 1.0, "fraction of the HBM bandwidth a streaming kernel reaches"),
    "fixed_s": (1e-7, 2e-4, "fixed cost per call, seconds at the reference clock"),
    "overlap": (1.0, 16.0, "p of the p-norm combining compute and memory time (16 ~ max)"),
    "l2_share": (0.01, 1.0, "share of the L2 whose operands stay resident between warm calls"),
    "l2_speedup": (1.0, 12.0, "L2 read bandwidth in multiples of the HBM bandwidth"),
    "sm_bandwidth": (0.5, 16.0, "bandwidth one busy SM draws, in multiples of HBM / SMs"),
    "block_s": (0.0, 2e-5, "seconds per KV block a work unit walks (attention)"),
    "seq_s": (0.0, 5e-5, "seconds per work unit: a sequence and head (group) (attention)"),
    "mask_s": (0.0, 2e-5, "seconds per masked KV block a unit walks (a band's or window's edge)"),
    "local_unit_s": (0.0, 2e-5, "seconds a local decode kernel adds per unit an SM runs in turn"),
    "grouped_unit": (0.2, 10.0, "cost of a grouped-query unit relative to one MHA head"),
    "act_passes": (0.0, 20.0, "bf16 passes over each MoE (token, expert) row around the GEMMs"),
    "quant_fixed_s": (0.0, 5e-5, "fixed cost of one quantization pass over a GEMM's input, s"),
    "quant_bytes": (0.0, 8.0, "cost of one quantization pass over the input, in HBM passes"),
    "quant_sm_bytes": (0.0, 8.0, "the same for a quantize bound per SM and clock, in 16 B a clock"),
    "link_eff": (0.02, 1.0, "fraction of the scale-up link bandwidth a collective reaches"),
    "latency_steps": (0.0, 20.0, "link latencies per algorithm step, at the reference clock"),
    "proto_s": (0.0, 5e-5, "synchronisation per step of a bulk-copy collective, seconds"),
    "eff_exp": (0.05, 4.0, "exponential rate in SFU rates (16 a clock per SM; >1: FMA too)"),
    "sfu_overlap": (1.0, 16.0, "p of the p-norm combining tensor-core and exponential time"),
    "dequant_s": (0.0, 1e-9, "seconds one SM takes to convert one element on its CUDA cores"),
    "tile_s": (0.0, 2e-5, "seconds per wave of GEMM/MoE output tiles beside their main loop"),
    "route_s": (0.0, 1e-5, "seconds one SM spends routing one (token, top-k) pair of a MoE"),
    "select_s": (0.0, 1e-5, "seconds of one round of a MoE's generic top-k (ref. clock)"),
    "expert_s": (0.0, 2e-6, "seconds per expert of the rank of a MoE call (ref. clock)"),
    "ep_map_s": (0.0, 3e-5, "seconds of a MoE call's expert-map kernels outside its GEMMs"),
    "ep_row_s": (0.0, 2e-6, "seconds a row of the row tile of a MoE call behind an expert map"),
    "pair_passes": (0.0, 16.0, "bf16 passes of a MoE over every routed pair, local or not"),
    "pair_fc1_passes": (0.0, 32.0, "bf16 passes over FC1's output row of every routed pair"),
    "token_s": (0.0, 1e-9, "seconds one SM spends on each hidden element of a MoE's tokens"),
    "row_s": (0.0, 1e-5, "seconds one SM spends on each (token, expert) row of a MoE's rank"),
    "sort_s": (0.0, 2e-5, "seconds a MoE's sort by expert takes past one block's tokens"),
    "sort_pair_s": (0.0, 1e-7, "seconds a MoE's one-block sort spends on each (token, top-k) pair"),
    "hidden_s": (0.0, 1e-8, "seconds of a MoE call's one-row latency a hidden element"),
    "token_row_s": (
        0.0,
        2e-6,
        "seconds one SM spends on each token of a prompt's per-token kernels",
    ),
    "tuned_rate": (1.0, 4.0, "tensor rate of a MoE call with a tuned config, x the default's"),
    "wave_draw": (0.05, 1.0, "share of HBM a wave of the Triton MoE default config's CTAs draws"),
    "reread_passes": (0.0, 4.0, "HBM-rate passes over a Triton MoE pair's rows read per col tile"),
    "first_wave": (0.0, 4.0, "main loops a MoE GEMM's first wave of tiles pays beyond one"),
    "unaligned_row_s": (0.0, 2e-9, "seconds a Triton MoE's FC2 weight row a row tile, unaligned K"),
    "promote_cycles": (0.0, 0.25, "SM cycles per output element and K block rescaling fp8 blocks"),
    "convert_row_cycles": (0.0, 4000.0, "SM cycles per weight row converting fp32 block scales"),
    "quant_row_cycles": (0.0, 2000.0, "SM cycles per input row of a quantize with a CTA a row"),
    "quant_l2_share": (0.0, 1.0, "share of the L2 a two-pass quantize's input stays in"),
    "node_s": (0.0, 2e-5, "seconds of one more small kernel node of a GEMM call's graph"),
    "host_s": (0.0, 5e-4, "host seconds of an eagerly timed wrapper's call, not clocked"),
    "align_s": (0.0, 2e-4, "host seconds a wrapper spends aligning unaligned block scales"),
    "atomic_cycles": (0.0, 64.0, "clock cycles per atomic folded into one address (the L2's)"),
    "launch_s": (0.0, 2e-5, "fixed cost of each further kernel of a decode call, s (ref. clock)"),
    "qhead_unit": (0.0, 10.0, "decode work per query head of a unit and 128 of head dim, in seq_s"),
    "switch_eff": (0.5, 1.0, "link efficiency of an in-switch (NVLS) all-reduce, x link_eff"),
    "unit_latency_s": (0.0, 2e-5, "seconds a prefill work unit waits on memory, not clocked"),
    "call_latency_s": (1e-7, 2e-4, "seconds of a prefill call's launches and waits, not clocked"),
    "pre_latency_s": (0.0, 2e-5, "seconds of a prefill call's RoPE pre-kernel, not clocked"),
    "epilogue_share": (0.0, 1.0, "share of a GEMM's output write no tile's mainloop hides"),
    "write_share": (0.2, 1.0, "a GEMM's output write's rate, x its operand stream's"),
    "token_copies": (0.0, 20.0, "SM work per token of a DeepEP normal kernel, in copies"),
    "reduce_s": (0.0, 1e-8, "seconds a DeepEP normal combine's warp takes an element it sums"),
    "walk_overlap": (1.0, 16.0, "p of the p-norm of a decode kernel walking a cache on one SM"),
    "split_wait_s": (0.0, 2e-5, "seconds a split MLA decode unit waits beside its stream"),
    "cta_s": (0.0, 2e-7, "seconds a CTA of Blackwell's latent MLA decode grid adds to the call"),
    "merge_s": (0.0, 2e-7, "seconds an in-kernel merge of one key split takes (ref. clock)"),
    "wave_s": (0.0, 1e-4, "seconds per further wave of a decode kernel's resident units"),
    "mmha_s": (0.0, 2e-5, "seconds TensorRT-LLM's MMHA decode call takes beyond its XQA call"),
    "narrow_head_s": (0.0, 4e-6, "seconds TensorRT-LLM's bf16 decode call saves at hd 64 / 192"),
    "mmha_block_s": (0.0, 3e-5, "least SM work of an MMHA call of 256- or 768-thread blocks"),
    "mmha_hidden_s": (0.0, 3e-5, "SM work of an MMHA call its own latency hides"),
    "empty_part": (0.0, 1.0, "share of a decode part's unit work a part of no cached key pays"),
    "spill_s": (0.0, 3e-5, "seconds Hopper's fp8 XQA call waits once its cache misses the L2"),
    "seq_unit": (0.0, 4.0, "FlashAttention-3 decode work a sequence, in a unit's (seq_s)"),
    "fa3_hd_wait_s": (0.0, 5e-6, "seconds a FlashAttention-3 decode call waits a 128 of head dim"),
    "one_wg_s": (0.0, 5e-6, "seconds a call of FlashAttention-3's 64-row prompt tiles saves"),
    # at most 1: the factor 1 + unit_hd x (hd / 128 - 1) stays above 0 at every head dim
    # (2 let it reach 0 at head dim 64 and go negative at 32)
    "unit_hd": (0.0, 1.0, "share of a decode unit's fixed work that grows with the head dim"),
    "turn_overlap": (
        1.0,
        16.0,
        "p of TensorRT-LLM's MMHA / mma.sync XQA decode at one unit an SM (below 1: overlap's)",
    ),
    "overlap_turns": (
        0.0,
        2.0,
        "growth of that p with the units an SM runs in turn (an exponent)",
    ),
    "scalar_load": (1.0, 4.0, "a conv CTA's wait on its unvectorised path, in vectorised waits"),
    "long_read": (1.0, 3.0, "a top-k row's reads past an SM's L1, x those of a row within it"),
    "slot_draw": (0.0, 1.5, "exponent of a top-k CTA's draw in its slots over 512"),
    "slot_wait": (0.0, 1.5, "exponent of a top-k row's passes' wait in its slots over 512"),
    "chunk_token_s": (
        0.0,
        2e-6,
        "seconds a chunked delta-rule call takes a token of its fullest chunk, once a call",
    ),
    "near_topk_s": (0.0, 5e-4, "seconds a wave of TensorRT-LLM's decode top-k rows near the top-k"),
    "amax_block_s": (
        0.0,
        2e-8,
        "seconds each block of a per-tensor amax that holds elements adds, one after another",
    ),
    "pool_switch_s": (
        0.0,
        1e-4,
        "seconds SGLang's DeepSeek-V4 decode compressor takes more past one MMA tile of rows",
    ),
}

#: Starting values, and the values a kernel class without a calibration uses.
DEFAULTS: dict[str, float] = {
    "eff_compute": 0.7,
    "eff_memory": 0.85,
    "fixed_s": 3e-6,
    "overlap": 4.0,
    "l2_share": 0.2,
    "l2_speedup": 3.0,
    "sm_bandwidth": 3.0,
    "block_s": 1e-7,
    "seq_s": 1e-6,
    "mask_s": 0.0,
    "local_unit_s": 0.0,
    "grouped_unit": 1.0,
    "act_passes": 2.0,
    "quant_fixed_s": 0.0,
    "quant_bytes": 1.0,
    "link_eff": 0.7,
    "latency_steps": 1.0,
    "proto_s": 0.0,
    "eff_exp": 0.8,
    "sfu_overlap": 16.0,
    "dequant_s": 0.0,
    "tile_s": 0.0,
    "route_s": 0.0,
    "select_s": 0.0,
    "expert_s": 0.0,
    "ep_map_s": 0.0,
    "ep_row_s": 0.0,
    "pair_passes": 0.0,
    "pair_fc1_passes": 0.0,
    "token_s": 0.0,
    "row_s": 0.0,
    "sort_s": 0.0,
    "sort_pair_s": 0.0,
    "hidden_s": 0.0,
    "token_row_s": 0.0,
    # a class whose rows run no tuned config (moe_time.TUNED_MOE) keeps the one rate
    "tuned_rate": 1.0,
    # a class whose rows run no Triton default config (moe_time.WAVE_DRAWN_MOE) keeps the HBM
    "wave_draw": 1.0,
    # a class fitted without it pays nothing for the Triton default config's reads of each
    # routed pair's activation rows by every column tile (moe_time.moe_terms)
    "reread_passes": 0.0,
    # a class fitted without it pays one main loop a wave, the first as the rest
    "first_wave": 0.0,
    # a class fitted without it pays nothing for an intermediate size off Triton's 16-element
    # alignment (moe_time.UNALIGNED_K_MOE)
    "unaligned_row_s": 0.0,
    # one fused multiply-add per output element and block, on the 128 FP32 lanes of an SM
    "promote_cycles": 1.0 / 128.0,
    # a class fitted where no call converts its scales (gemm_time._scale_conversion) has none
    "convert_row_cycles": 0.0,
    # the nvfp4 quantize's CTA a row (gemm_time._input_quantization) where a class has no fit
    # of it (a Hopper fit's stand-in on Blackwell): a small CTA's life as SGLang's MLA
    # quantize reads it (gemm_time.MLA_QUANT_CTA_CYCLES, 175), where the B200 fits read 115-168
    "quant_row_cycles": 175.0,
    # a GEMM class fitted without its two-pass quantize's second read from the L2
    # (gemm_time._input_quantization) reads it from the HBM
    "quant_l2_share": 0.0,
    # one more small kernel in a GEMM call's graph (gemm_time.CONVERT_KERNELS): the quantize
    # kind's assumed 1 us a graph node, fitted where rows convert their scales both ways
    # (SGLang's B200, gemm_time.PAD_CONVERT_KERNELS); a profile composed for another
    # generation takes its TensorRT-LLM fit's quantize node
    # (engine_profiles.with_generation_kernels)
    "node_s": 1e-6,
    # the host floor of a wrapper timed eagerly (gemm_time._host_floor; only its rows pay it):
    # a fit's start, about an eager Python call of a few ops (50 us), and 10 us for its scales'
    # alignment; a start on zero would leave the floor's max() without a gradient
    "host_s": 5e-5,
    "align_s": 1e-5,
    # vLLM's per-tensor amax folds one atomic a token into one fp32 scale: 7.7 cycles each
    # in the shipped fit on its H100 gemm_perf rows, 7.0 on its B200 rows (3.9 and 3.5 ns),
    # since a row's whole steps (gemm_time.QUANT_ROW_STRIDE) carry part of the few-token
    # floor (11.6 and 10.3 before); the starting value is the first fit's (11.8)
    "atomic_cycles": 11.8,
    # vLLM's per-tensor quantize passes per SM and clock (gemm_time.QUANT_SM_BYTES_PER_CLOCK)
    "quant_sm_bytes": 1.0,
    "launch_s": 2e-6,
    "qhead_unit": 0.1,
    "switch_eff": 1.0,
    "unit_latency_s": 0.0,
    "call_latency_s": 0.0,
    "pre_latency_s": 0.0,
    # a tile's epilogue writes its output after its mainloop, unhidden
    "epilogue_share": 1.0,
    # the output written at the operands' rate where no fit saw it (gemm_time)
    "write_share": 1.0,
    "token_copies": 0.0,
    # a combine class fitted before the reduction term (comm_time) has none
    "reduce_s": 0.0,
    "merge_s": 0.0,
    # TensorRT-LLM's MMHA decode call as long as its XQA call where no fit saw both
    "mmha_s": 0.0,
    # no step by head dim where no fit saw it (attention_time.NARROW_HEAD_DIMS)
    "narrow_head_s": 0.0,
    # no MMHA block-size step where no fit saw it (attention_time.MMHA_NARROW_FACTORS)
    "mmha_block_s": 0.0,
    "mmha_hidden_s": 0.0,
    # a part of a split decode that holds no key (before a window) pays a full part's unit work
    # where no fit saw it (attention_time.decode_terms)
    "empty_part": 1.0,
    # no wait for a cache beyond the L2 where no fit saw it (attention_time._decode_calls_s)
    "spill_s": 0.0,
    # no work a sequence beside its units' where no fit saw it (attention_time.decode_terms)
    "seq_unit": 0.0,
    "fa3_hd_wait_s": 0.0,
    # a call of FlashAttention-3's one-warpgroup prompt tiles waits as one of two-warpgroup
    # tiles where no fit saw it (attention_time.fa3_one_warpgroup)
    "one_wg_s": 0.0,
    # a decode unit's fixed work the same at every head dim where no fit saw it
    "unit_hd": 0.0,
    # a class fitted without them: the class's overlap whatever the units an SM runs in turn
    "turn_overlap": 0.0,
    "overlap_turns": 0.0,
    # a further wave of resident decode units costs 1 us per 8 query rows and 1024 of head
    # dim (between the fitted XQA figures)
    "wave_s": 1e-6,
    # no overlap: a kernel that walks a cache on one SM without a producer warp waits for each
    # block's loads before its products
    "walk_overlap": 1.0,
    "split_wait_s": 0.0,
    "cta_s": 0.0,
    # a conv kernel's CTAs wait as long on either load path where no fit saw the slower one
    "scalar_load": 1.0,
    "long_read": 1.0,
    "slot_draw": 0.0,
    "slot_wait": 0.0,
    "chunk_token_s": 0.0,
    "near_topk_s": 0.0,
    "pool_switch_s": 0.0,
    # TensorRT-LLM's per-tensor amax blocks, one after another (elementwise_time.AMAX_GRID_BLOCKS):
    # none where a class was not fitted with them
    "amax_block_s": 0.0,
}

#: the starting point of both prefill kinds (FlashAttention-style and MLA's expanded prefill)

#: the starting point of both prefill kinds (FlashAttention-style and MLA's expanded prefill)
_PREFILL_DEFAULTS: dict[str, float] = {
    "fixed_s": 0.0,
    "eff_exp": 1.0,
    "sfu_overlap": 2.0,
    "eff_compute": 0.55,
    "seq_s": 0.0,
    "pre_latency_s": 3e-6,
    "call_latency_s": 1e-5,
    "unit_latency_s": 3e-6,
}

_KIND_DEFAULTS: dict[str, dict[str, float]] = {
    # DeepEP's normal kernels without a fit of their own (a profile fitted where no DeepEP was
    # measured): their SMs draw the link with 24 of a 132-SM part (``sm_bandwidth`` = 132 /
    # 24, in link / SMs), the SMs DeepEP 1.0.0 runs them on
    "dispatch": {"sm_bandwidth": 5.5},
    "combine": {"sm_bandwidth": 5.5},
    # prefill: the RoPE + cache-write pre-kernel's launch and wait (``pre_latency_s``) is not
    # fitted (every measured prefill row has it); the waits start where the measured rows put
    # them, 10 us a call and 3 us a unit; the exponentials start at the SFUs' datasheet rate
    # (``eff_exp`` 1; fitted, above 1 only on Blackwell, whose kernels compute some on the FMA
    # pipes), how much of them the MMAs hide is ``sfu_overlap``, started
    # at 2 (a Euclidean p-norm: FlashAttention-3's two warp-groups overlap one's softmax with
    # the other's MMAs, in part)
    "attention_prefill": _PREFILL_DEFAULTS,
    "attention_decode": {"fixed_s": 8e-6},
    "mla_prefill": _PREFILL_DEFAULTS,
    # an fp8 latent cache converted to bf16 by a kernel of its own (``cache_convert``) where no
    # fit saw one: PyTorch's software fp8 decode, about half a cycle an element on an SM (a
    # leading-zero count and a float conversion at 16 a clock, some 20 integer operations at
    # 64 a clock): an assumed figure, the start of a fit
    "mla_decode": {
        "fixed_s": 0.0,
        "eff_compute": 0.6,
        "seq_s": 0.0,
        "dequant_s": 0.5 / REFERENCE_CLOCK_HZ,
    },
    "moe": {"fixed_s": 2e-5, "eff_compute": 0.5},
    "elementwise": {"fixed_s": 2e-6},
    # a weight-only GEMM's conversion of each weight to bf16 (``dequant_s``) where no fit saw
    # one: about 1.5 instructions an element (the interleaved int4/int8 -> bf16 conversion,
    # about one a weight, and the per-channel scale's multiply, one per two) on the 128 lanes
    # an SM issues each clock (four schedulers of 32)
    "gemm": {"dequant_s": 1.5 / 128.0 / REFERENCE_CLOCK_HZ},
    # a quantize kernel without a fit: one graph node costs about 1 us (an assumed figure:
    # launch to completion of a kernel whose blocks make one memory round trip and one
    # store); the operands of a warm replay stay in half the L2 (A100 and H100 keep a line
    # read by every SM in each of their two L2 partitions)
    "quantize": {"fixed_s": 1e-6, "l2_share": 0.5},
}

_COMM_FIT = ("fixed_s", "link_eff", "latency_steps", "proto_s", "eff_memory")
_DEEPEP_FIT = ("fixed_s", "link_eff", "latency_steps", "sm_bandwidth", "token_copies")

#: The parameters a fit adjusts, by kind (the others keep their defaults).
FIT_PARAMS: dict[str, tuple[str, ...]] = {
    "gemm": (
        "eff_compute",
        "eff_memory",
        "fixed_s",
        "overlap",
        "l2_share",
        "l2_speedup",
        "sm_bandwidth",
        "epilogue_share",
        "tile_s",
        "write_share",
    ),
    "attention_prefill": (
        "eff_compute",
        "eff_memory",
        "call_latency_s",
        "overlap",
        "unit_latency_s",
        "block_s",
        "mask_s",
        "sfu_overlap",
        "eff_exp",
        "token_row_s",
        "fa3_hd_wait_s",
        "one_wg_s",
    ),
    "mla_prefill": (
        "eff_compute",
        "eff_memory",
        "call_latency_s",
        "overlap",
        "unit_latency_s",
    ),
    "attention_decode": (
        "eff_compute",
        "eff_memory",
        "fixed_s",
        "overlap",
        "sm_bandwidth",
        "block_s",
        "seq_s",
        "grouped_unit",
        "launch_s",
        "qhead_unit",
        "wave_s",
        "l2_share",
        "l2_speedup",
        "local_unit_s",
        "mmha_s",
        "turn_overlap",
        "overlap_turns",
        "narrow_head_s",
        "empty_part",
        "spill_s",
        "seq_unit",
        "fa3_hd_wait_s",
        "unit_hd",
        "mmha_block_s",
        "mmha_hidden_s",
    ),
    "mla_decode": (
        "eff_compute",
        "eff_memory",
        "call_latency_s",
        "overlap",
        "block_s",
        "unit_latency_s",
        "walk_overlap",
        "split_wait_s",
        "cta_s",
    ),
    "moe": (
        "eff_compute",
        "eff_memory",
        "fixed_s",
        "overlap",
        "sm_bandwidth",
        "act_passes",
        "tile_s",
        "route_s",
        "select_s",
        "expert_s",
        "ep_map_s",
        "ep_row_s",
        "pair_passes",
        "pair_fc1_passes",
        "token_s",
        "row_s",
        "sort_s",
        "sort_pair_s",
        "hidden_s",
        "tuned_rate",
        "wave_draw",
        "reread_passes",
        "first_wave",
        "unaligned_row_s",
    ),
    "elementwise": (
        "eff_memory",
        "fixed_s",
        "sm_bandwidth",
        "unit_latency_s",
        "scalar_load",
        "long_read",
        "slot_draw",
        "slot_wait",
        "near_topk_s",
        "tile_s",
        "chunk_token_s",
        "l2_share",
        "l2_speedup",
    ),
    "quantize": (
        "eff_memory",
        "fixed_s",
        "sm_bandwidth",
        "l2_share",
        "l2_speedup",
        "unit_latency_s",  # a CTA an SM launches (rows with ``units``: vLLM's token CTAs)
        "amax_block_s",  # a block of TensorRT-LLM's amax (rows with ``amax_blocks``)
    ),
    **{k: _COMM_FIT for k in COMM_KINDS},
    "all_reduce": (*_COMM_FIT, "switch_eff"),
    "dispatch": (*_DEEPEP_FIT, "unit_latency_s"),
    "combine": (*_DEEPEP_FIT, "unit_latency_s", "reduce_s"),
}
_FP8_QUANT = ("quant_fixed_s", "quant_bytes")


def fit_params(kind: str, dtype: str) -> tuple[str, ...]:
    """The parameters a fit adjusts for one kernel class."""
    names = FIT_PARAMS.get(kind, ("eff_compute", "eff_memory", "fixed_s"))
    if kind == "gemm" and (dtype.startswith("fp8") or dtype == "nvfp4"):
        names = names + _FP8_QUANT  # the GEMM's input quantization (fp8 or nvfp4)
    if kind == "gemm" and dtype == "fp8_block":
        names = (*names, "promote_cycles", "convert_row_cycles", "node_s", "host_s", "align_s")
    if kind == "gemm" and dtype == "fp8":
        names = (*names, "atomic_cycles")  # a per-tensor amax's atomics on its one scale
        names = (*names, "quant_sm_bytes")  # vLLM's quantize, bound per SM and clock
        names = (*names, "quant_row_cycles")  # SGLang's quantize's CTA a token (gemm_time)
        names = (*names, "quant_l2_share")  # a two-pass quantize's second read (gemm_time)
    if kind == "gemm" and dtype == "nvfp4":
        names = (*names, "quant_row_cycles")  # its quantize's CTA a row (gemm_time)
    if kind == "gemm" and dtype in ("w4a16", "w8a16"):
        names = (*names, "dequant_s")
    if kind == "mla_decode" and dtype == "fp8":
        names = (*names, "dequant_s")  # a cache converted to bf16 by a kernel of its own
    if kind == "attention_decode" and dtype.startswith("fp8"):
        names = (*names, "dequant_s")  # MMHA converts each fp8 cache element
    if kind == "attention_decode":
        names = (*names, "merge_s")  # TensorRT-LLM's XQA merges its key splits itself
    return names


def borrowed_params(
    kind: str, dtype: str, params: dict[str, float], fitted: dict[str, float]
) -> dict[str, float]:
    """``params`` of a ``kind``/``dtype`` class whose fit (``fitted``) came from another dtype
    (a profile fitted on a device without fp8 units has no fp8 class): the terms that fit
    never saw get their physical reading instead of the uncalibrated defaults. The compute
    rate and the bytes already follow the dtype (its datasheet peak, its element size); each
    graph node of an fp8 GEMM's input quantization (``quant_launches``: three for a dynamic
    per-tensor one) is one more kernel of the class, so it costs the class's fixed cost, and
    the quantization's bytes (its reads of the bf16 input and its fp8 write) move at the
    class's bandwidth (``quant_bytes = 1``)."""
    if kind == "gemm" and "host_s" not in fitted:
        # a fit that saw no wrapper's host floor (gemm_time._host_floor) stands in with none:
        # the defaults are only a fit's start
        params["host_s"] = params["align_s"] = 0.0
    if kind == "gemm" and dtype.startswith("fp8") and "quant_fixed_s" not in fitted:
        params["quant_fixed_s"] = params["fixed_s"]
        params["quant_bytes"] = 1.0
    if kind == "attention_decode" and dtype.startswith("fp8") and "dequant_s" not in fitted:
        # a grouped-query unit of a bf16 fit is the bf16 XQA kernel's; an fp8 cache on a device
        # with fp8 tensor cores runs another kernel (Hopper's fp8 XQA) that fit never saw: its
        # unit keeps the uncalibrated cost of one MHA head
        params["grouped_unit"] = DEFAULTS["grouped_unit"]
    return params


def class_key(kind: str, dtype: str, variant: str = "") -> str:
    """The name of a kernel class in a profile: ``"gemm:fp8_block"``, or with a variant (another
    kernel of the same kind, see :mod:`mlacalc.words.kernels`) ``"gemm:fp8_block:bmm"``."""
    return f"{kind}:{dtype}:{variant}" if variant else f"{kind}:{dtype}"


def default_params(kind: str) -> dict[str, float]:
    """The uncalibrated starting point of a kernel class."""
    out = dict(DEFAULTS)
    out.update(_KIND_DEFAULTS.get(kind, {}))
    return out


def scale_params(
    kind: str, prm: dict[str, float], fig: DeviceFigures, variant: str = ""
) -> dict[str, float]:
    """``prm`` with the times of work on the SMs (cycles, stated at the reference clock) scaled
    to the device's clock; of a collective only its fixed cost and synchronisation, which also
    scale with the device's link latency (:data:`COMM_ROUND_TRIPS`) unless the ``variant`` is
    launched from the host (:data:`HOST_LAUNCHED`)."""
    scale = REFERENCE_CLOCK_HZ / fig.clock_hz
    out = dict(prm)
    for name in COMM_CLOCKED if kind in COMM_KINDS else CLOCKED:
        out[name] = prm[name] * scale
    if kind in COMM_KINDS and variant not in HOST_LAUNCHED and fig.link_latency_s > 0:
        trips = fig.link_latency_s / REFERENCE_LINK_LATENCY_S
        for name in COMM_ROUND_TRIPS:
            out[name] = out[name] * trips
    return out


def kernel_terms(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float], *, scaled: bool = False
) -> dict[str, np.ndarray]:
    """The time terms of every kernel of ``batch`` on ``fig`` with parameters ``prm``:
    ``compute_s``, ``memory_s`` (link time for collectives), ``fixed_s``, ``extra_s`` and
    ``seconds`` per call (times ``calls``). ``scaled``: ``prm`` is already clock-scaled
    (:func:`scale_params`)."""
    kind = batch.kind
    if not scaled:
        prm = scale_params(kind, prm, fig, batch.variant)
    if kind == "gemm":
        terms = gemm_terms(batch, fig, prm)
    elif kind in ("attention_prefill", "mla_prefill"):
        terms = prefill_terms(batch, fig, prm)
    elif kind == "attention_decode":
        terms = decode_terms(batch, fig, prm)
    elif kind == "mla_decode":
        terms = mla_decode_terms(batch, fig, prm)
    elif kind == "moe":
        terms = moe_terms(batch, fig, prm)
    elif kind in COMM_KINDS:
        terms = collective_terms(batch, fig, prm)
    else:
        terms = streaming_terms(batch, fig, prm)
    if kind in COMM_KINDS:
        body = terms["memory_s"]
    else:
        # (a kernel rule may give each row its own p: decode_terms' ``overlap_p``)
        body = combine(
            terms["compute_s"], terms["memory_s"], terms.pop("overlap_p", prm["overlap"])
        )
    calls = np.asarray(batch.calls, dtype=np.float64)
    fixed = np.full(
        len(batch), call_fixed_s(batch, fig, prm) if kind == "attention_decode" else prm["fixed_s"]
    )
    if "plugin" in batch.shape:
        fixed = fixed + UNGRAPHED_LAUNCH_S * (col(batch, "plugin", 0) > 0)
    # a rule's own fixed cost a call (SGLang's V4 compressor switch): a fixed cost, as the
    # fitted one is, which the limiter (KernelTime / OpTime ``limited_by``) reads as latency
    fixed = fixed + terms.pop("call_fixed_s", 0.0)
    terms["fixed_s"] = fixed
    terms["seconds"] = (fixed + body + terms["extra_s"]) * calls
    return terms
