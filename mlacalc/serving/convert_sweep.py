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
from mlacalc.cost.engine import attention_flops, kv_cache
from mlacalc.cost.params import weight_bytes
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.models.convert import convert
from mlacalc.models.loading import ModelConfig, model_argument
from mlacalc.timemodel.predict import predict_time
from mlacalc.words import arguments as args
from mlacalc.words.units import human_bytes

__all__ = ["RankRow", "fit_warning", "rank_sweep", "step_seconds"]


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
    #: MHA2MLA as published (every KV head's RoPE part cached); ``cache_bytes_per_token`` is
    #: then the shared-RoPE form's (None: no other form; the source row)
    published_cache_bytes_per_token: int | None = None

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


def fit_warning(
    models: dict[str, ModelConfig],
    hardware: Any,
    seq_len: int,
    batch: int,
    kv_dtype: str = "bf16",
    deploy: str = "`mlacalc plan` sizes a deployment over several (convert --save, then plan "
    "the file)",
) -> str:
    """'' when one GPU of ``hardware`` holds each of ``models`` (label -> model: the source and
    the converted one) with its cache of ``batch`` sequences of ``seq_len`` tokens; otherwise
    one sentence saying which do not fit, by how much, that the step times assume it, and
    ``deploy``: where a deployment over several GPUs is sized.

    Examples
    --------
    >>> from mlacalc.models.convert import convert
    >>> c = convert("llama-3-70b", kv_lora_rank=512)
    >>> fit_warning({"source": c.source, "converted": c.model}, "H100", 32768, 8)[:46]
    'neither the source (131.42 GiB of weights + 80'
    >>> fit_warning({"source": convert("llama-3-8b").source}, "H200", 1024, 1)
    ''
    """
    device = load_hardware(hardware)
    over = []
    for label, m in models.items():
        weights = weight_bytes(m)
        cache = kv_cache(m, seq_len, batch, kv_dtype=kv_dtype).total_bytes
        if weights + cache > device.memory_bytes:
            over.append(
                f"the {label} ({human_bytes(weights)} of weights + {human_bytes(cache)} of "
                f"cache = {human_bytes(weights + cache)})"
            )
    if not over:
        return ""
    room = f"the {human_bytes(device.memory_bytes)} of one"
    if len(over) > 1:
        said = f"neither {' nor '.join(over)} fits in {room}"
    else:
        said = f"{over[0]} does not fit in {room}"
    return (
        f"{said} "
        f"{device.name} at seq_len {seq_len:,} x batch {batch:,}: the step times are those of "
        f"one GPU holding the model as if it did; {deploy}"
    )


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
                params=cc.served_params,  # as report counts the saved model
                decode_attention_flops=cc.flops,
                decode_s=step_seconds(c.model, hardware, "decode", seq_len, batch, impl),
                prefill_s=step_seconds(c.model, hardware, "prefill", seq_len, batch, None),
                published_cache_bytes_per_token=cc.published_cache_bytes_per_token,
            )
        )
    return rows
