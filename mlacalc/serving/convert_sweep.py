"""A conversion to MLA at several latent ranks: cache, parameters, FLOPs and step times per rank.

What an engineer deciding on a conversion looks at before any training: for each rank
``d_c``, the converted model's cache per token, its parameters, its attention FLOPs and the
predicted time of a decode step and of a prefill on a device (the whole model's forward step,
timed by the calibrated kernel model, :func:`mlacalc.timemodel.predict.predict_time` with
``scope="model"``), beside the source model's at the same step. Step times are for one GPU
holding the whole model (what ``predict_time`` times); a deployment over several GPUs is the
planner's (``mlacalc plan`` with the converted model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlacalc.cost.convert_cost import conversion_cost
from mlacalc.cost.engine import attention_flops
from mlacalc.models.convert import convert
from mlacalc.models.loading import ModelConfig, model_argument
from mlacalc.timemodel.predict import predict_time
from mlacalc.words import arguments as args

__all__ = ["RankRow", "rank_sweep", "step_seconds"]


@dataclass(frozen=True)
class RankRow:
    """One rank of a sweep (``rank`` 0: the source model)."""

    rank: int
    model: str
    cache_bytes_per_token: int
    params: int
    decode_attention_flops: int
    decode_s: float
    prefill_s: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def step_seconds(
    model: ModelConfig, hardware: Any, phase: str, seq_len: int, batch: int, impl: str | None
) -> float:
    """The predicted time of one forward step of the whole model (decode: one token per
    sequence at ``seq_len`` keys; prefill: ``seq_len`` causal tokens per sequence)."""
    causal = phase == "prefill"
    return predict_time(
        model, hardware, phase, seq_len, batch, impl=impl, scope="model", causal=causal
    ).seconds


def rank_sweep(
    model: ModelConfig | str,
    ranks: Any,
    hardware: Any = "H100",
    method: str = "transmla",
    svd: str = "joint",
    rope_dim: int | None = None,
    seq_len: int = 4096,
    batch: int = 1,
    impl: str = "absorbed",
    kv_dtype: str = "bf16",
) -> list[RankRow]:
    """The source model and its conversion at each rank of ``ranks``, one row each.

    Decode uses ``impl`` (``absorbed`` by default, what MLA serving runs); prefill the
    implementation mlacalc picks for prefill (expanded heads).

    Examples
    --------
    >>> rows = rank_sweep("llama-3-8b", [256, 512], seq_len=1024)
    >>> [r.cache_bytes_per_token for r in rows]    # source, then (d_c + 64) x 2 B x 32 layers
    [131072, 20480, 36864]
    """
    m = model_argument(model)
    ranks = args.one_or_many("ranks", ranks, what="ranks")
    rows = [
        RankRow(
            rank=0,
            model=m.name,
            cache_bytes_per_token=conversion_cost(
                convert(m, method=method, svd=svd, rope_dim=rope_dim), kv_dtype=kv_dtype
            ).source_cache_bytes_per_token,
            params=conversion_cost(convert(m, method=method, rope_dim=rope_dim)).source_params,
            decode_attention_flops=attention_flops(m, "decode", seq_len, batch),
            decode_s=step_seconds(m, hardware, "decode", seq_len, batch, None),
            prefill_s=step_seconds(m, hardware, "prefill", seq_len, batch, None),
        )
    ]
    for rank in ranks:
        c = convert(m, method=method, kv_lora_rank=rank, rope_dim=rope_dim, svd=svd)
        cc = conversion_cost(c, "decode", seq_len, batch, impl=impl, kv_dtype=kv_dtype)
        rows.append(
            RankRow(
                rank=c.kv_lora_rank,
                model=c.model.name,
                cache_bytes_per_token=cc.cache_bytes_per_token,
                params=cc.params,
                decode_attention_flops=cc.flops,
                decode_s=step_seconds(c.model, hardware, "decode", seq_len, batch, impl),
                prefill_s=step_seconds(c.model, hardware, "prefill", seq_len, batch, None),
            )
        )
    return rows
