"""Capacity planning: what fits on a set of GPUs, and how fast it can decode at best.

Parallelism (``gpus = tp x dp``):

- tensor parallel (``tp``): attention heads, FFN widths, embedding and head split over
  ``tp`` ranks; MLA's latent projection (``kv_a_proj_with_mqa``) and the norms are
  replicated; GQA's K/V projections split up to ``n_kv`` ranks and replicate beyond;
- data parallel (``dp``): ``dp`` replicas, each serving its own sequences;
- expert parallel (``ep``): routed experts split over ``ep`` GPUs (``ep`` divides the
  experts and the GPU count); ``ep = 1`` splits each expert over the ``tp`` ranks instead.

KV cache per token per GPU: MLA's latent is replicated on every tensor-parallel rank (it
is not split by heads); GQA/MQA/MHA keep ``ceil(n_kv / tp)`` KV heads per rank. A page
(block) of ``page_size`` tokens is the allocation unit, so each sequence's cache is rounded
up to whole pages. ``memory_reserve`` is the fraction of each GPU's memory kept for
activations and workspace (0.1, like vLLM's default utilisation of 0.9).

Throughput figures are roofline upper bounds: no communication, perfect overlap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .config import ModelConfig
from .dtypes import KVLayout, dtype_bits, resolve_kv_layout
from .engine import _model, attention_params, kv_cache
from .errors import DoesNotFitError, InvalidArgumentError
from .hardware import HardwareSpec, load_hardware
from .params import param_counts
from .roofline import predict_time

__all__ = ["Plan", "plan", "DoesNotFitError"]


@dataclass(frozen=True)
class Plan:
    model: str
    hardware: str
    gpus: int
    tp: int
    dp: int
    ep: int
    weight_dtype: str
    kv_layout: str
    page_size: int
    memory_per_gpu_bytes: int
    usable_per_gpu_bytes: int
    weights_per_gpu_bytes: int
    kv_budget_per_gpu_bytes: int
    kv_bytes_per_token_per_gpu: int
    kv_tokens_per_gpu: int
    seq_len: int
    batch: int | None
    max_batch: int
    max_context: int | None
    max_position_embeddings: int | None
    decode_batch: int | None
    decode_step_s: float | None
    decode_tokens_per_s: float | None
    decode_bound: str | None
    prefill_s: float | None
    binding: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _weights_per_gpu(m: ModelConfig, tp: int, ep: int, include_mtp: bool, bits: int) -> int:
    counts = param_counts(m)
    b = counts.breakdown
    attn = attention_params(m)
    # attention: replicated pieces stay whole on every rank, head-split pieces divide by tp
    replicated = sum(v for k, v in attn.items() if k in ("q_a_proj", "q_a_layernorm", "kv_a_proj_with_mqa",
                                                         "kv_a_layernorm"))
    if not m.is_mla and m.family not in ("gpt2", "falcon"):
        kv = attn["k_proj"] + attn["v_proj"]
        kv_per_rank = kv * math.ceil(m.num_key_value_heads / tp) / m.num_key_value_heads if tp > 1 else kv
        split = sum(attn.values()) - kv
        attn_rank = split / tp + kv_per_rank
    else:
        attn_rank = replicated + (sum(attn.values()) - replicated) / tp
    per_gpu = m.num_hidden_layers * attn_rank
    per_gpu += (b["embedding"] + b["lm_head"] + b["position_embedding"] + b["dense_ffn"] + b["moe_shared_experts"]) / tp
    per_gpu += b["moe_router"] + b["norms"]                  # small; replicated
    per_gpu += b["moe_routed_experts"] / (ep if ep > 1 else tp)
    if include_mtp:
        per_gpu += counts.mtp / tp
    return math.ceil(per_gpu * bits / 8)


def _kv_per_token_per_gpu(m: ModelConfig, layout: KVLayout, tp: int, include_mtp: bool) -> int:
    row = kv_cache(m, 1, 1, layout, None, include_mtp).bytes_per_token
    if m.is_mla:
        return row                                         # the latent is replicated on every TP rank
    heads_per_rank = math.ceil(m.num_key_value_heads / tp)
    return row * heads_per_rank // m.num_key_value_heads


def plan(model: "ModelConfig | str", hardware: "HardwareSpec | str", gpus: int = 8, *, tp: int | None = None,
         dp: int | None = None, ep: int = 1, weight_dtype: str | None = None,
         kv_dtype: "str | KVLayout" = "bf16", page_size: int = 1, memory_reserve: float = 0.1,
         seq_len: int = 131072, batch: int | None = None, include_mtp: bool = False) -> Plan:
    """Fit a model on ``gpus`` devices and report capacity and roofline throughput.

    Examples
    --------
    >>> p = plan("deepseek-v3", "H200", 8, kv_dtype="bf16", seq_len=131072)
    >>> p.max_batch, p.binding
    (4, 'kv capacity')
    """
    m = _model(model)
    hw = load_hardware(hardware)
    for name, value in (("gpus", gpus), ("ep", ep), ("page_size", page_size), ("seq_len", seq_len)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InvalidArgumentError(name, f"must be a positive integer, got {value!r}")
    if tp is None and dp is None:
        tp, dp = gpus, 1
    elif tp is None:
        tp = gpus // dp if dp and gpus % dp == 0 else 0
    elif dp is None:
        dp = gpus // tp if gpus % tp == 0 else 0
    for name, value in (("tp", tp), ("dp", dp)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InvalidArgumentError(name, f"tp x dp must equal gpus ({gpus}); got tp={tp}, dp={dp}")
    if tp * dp != gpus:
        raise InvalidArgumentError("tp", f"tp x dp must equal gpus: {tp} x {dp} != {gpus}")
    if m.num_attention_heads % tp:
        raise InvalidArgumentError("tp", f"tensor parallel degree {tp} does not divide the "
                                   f"{m.num_attention_heads} attention heads of {m.label}")
    if ep > 1:
        if not m.is_moe:
            raise InvalidArgumentError("ep", f"{m.label} has no experts to spread; use ep=1")
        if m.n_routed_experts % ep:
            raise InvalidArgumentError("ep", f"expert parallel degree {ep} does not divide the "
                                       f"{m.n_routed_experts} routed experts")
        if gpus % ep:
            raise InvalidArgumentError("ep", f"expert parallel degree {ep} does not divide the {gpus} GPUs")
    if not 0 <= memory_reserve < 1:
        raise InvalidArgumentError("memory_reserve", f"must be a fraction in [0, 1), got {memory_reserve!r}")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch <= 0):
        raise InvalidArgumentError("batch", f"must be a positive integer, got {batch!r}")
    w_dtype = weight_dtype or m.weights_dtype
    layout = resolve_kv_layout(kv_dtype)

    memory = hw.memory_bytes
    usable = int(memory * (1 - memory_reserve))
    weights = _weights_per_gpu(m, tp, ep, include_mtp, dtype_bits(w_dtype))
    budget = usable - weights
    if budget <= 0:
        raise DoesNotFitError(f"{m.label} does not fit on {gpus} x {hw.name}: the weights need "
                              f"{weights / 1e9:.1f} GB per GPU in {w_dtype} (tp={tp}, ep={ep}) and "
                              f"{usable / 1e9:.1f} GB are usable; add GPUs, raise tp/ep or use a smaller weight dtype")
    per_token = _kv_per_token_per_gpu(m, layout, tp, include_mtp)
    tokens_per_gpu = budget // per_token
    pages = lambda s: math.ceil(s / page_size) * page_size   # noqa: E731
    per_replica_seqs = tokens_per_gpu // pages(seq_len)
    max_batch = per_replica_seqs * dp
    max_context = None
    if batch is not None:
        per_replica = math.ceil(batch / dp)
        max_context = (tokens_per_gpu // per_replica) // page_size * page_size
    step = tokens_s = prefill_s = None
    bound = None
    # throughput at the requested batch, or at the largest that fits when it does not
    run_batch = max_batch if batch is None else min(batch, max_batch)
    if run_batch > 0:
        replica_batch = math.ceil(run_batch / dp)
        p = predict_time(m, hw, "decode", seq_len, replica_batch, scope="model", dtype="bf16",
                         weight_dtype=w_dtype, kv_dtype=layout)
        step = p.seconds / tp
        tokens_s = run_batch / step
        bound = p.bound
    if per_replica_seqs >= 1:
        prefill_s = predict_time(m, hw, "prefill", seq_len, 1, scope="model", dtype="bf16", weight_dtype=w_dtype,
                                 kv_dtype=layout).seconds / tp
    if batch is None or batch > max_batch:
        binding = "kv capacity"              # the cache, not speed, limits the batch
    else:
        binding = "memory bandwidth" if bound == "memory" else "compute"
    return Plan(model=m.name, hardware=hw.name, gpus=gpus, tp=tp, dp=dp, ep=ep, weight_dtype=w_dtype,
                kv_layout=layout.name, page_size=page_size, memory_per_gpu_bytes=memory,
                usable_per_gpu_bytes=usable, weights_per_gpu_bytes=weights, kv_budget_per_gpu_bytes=budget,
                kv_bytes_per_token_per_gpu=per_token, kv_tokens_per_gpu=tokens_per_gpu, seq_len=seq_len,
                batch=batch, max_batch=max_batch, max_context=max_context,
                max_position_embeddings=m.max_position_embeddings, decode_batch=run_batch if run_batch > 0 else None,
                decode_step_s=step, decode_tokens_per_s=tokens_s,
                decode_bound=bound, prefill_s=prefill_s, binding=binding)
