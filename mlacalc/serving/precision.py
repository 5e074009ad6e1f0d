"""Weights per component: each part of the model in its own format, as deployments ship
them (experts in nvfp4 with attention in fp8 or bf16, the head in bf16) and the KV cache apart.

A checkpoint's own formats are read where it states them (``weight_dtype=None``: its
``quantization_config`` or ModelOpt's ``hf_quant_config.json``, per tensor with the modules it
excludes, :func:`mlacalc.cost.quant.component_precision`); ``component_dtypes`` overrides named
components on top of that base (or of ``weight_dtype``): ``{"experts": "nvfp4", "attention":
"fp8"}`` (``--expert-dtype nvfp4 --attention-dtype fp8``). The components are
:data:`mlacalc.models.quantization.COMPONENTS`: ``attention`` (every projection of a layer's
attention, the absorbed MLA products with them), ``dense_ffn``, ``experts`` (the routed ones),
``shared_experts``, ``embeddings`` and ``head``; norms and routers stay as they are.

A component in a format is sized at the format's bits per weight, its scales included
(:data:`FORMAT_BITS`: nvfp4 4.5, one fp8 scale per 16; mxfp4 4.25, one 8-bit scale per 32;
fp8_block 8 + 1/512, one float32 per 128 x 128 block, counted exactly per matrix (ceil on both
sides, :func:`fp8_block_bits`); the others their dtype's bits), and each of its kernels is
timed by its own class: the GEMM (or grouped MoE) class of that weight format
(:func:`mlacalc.words.dtypes.weight_gemm_class`: fp8 weights the fp8 GEMMs, fp4 the fp4 GEMMs
where the device has them, integer weights the weight-only kernels; fp8_block the block-scaled
fp8 GEMM and MoE), reading the weights in that format.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from mlacalc.cost.engine import kv_cache
from mlacalc.cost.params import param_counts
from mlacalc.cost.quant import (
    COMPONENT_OF_PART,
    FORMAT_BITS,
    FP8_BLOCK,
    KEPT,
    format_bits,
    format_class,
    kept_components,
)
from mlacalc.models.loading import ModelConfig
from mlacalc.models.quantization import COMPONENTS, format_dtype
from mlacalc.models.tensors import part_of, tensors
from mlacalc.serving.layout import (
    NORM_BITS,
    Layout,
    attention_norm_params,
    weight_breakdown,
    weight_bytes_by_part,
)
from mlacalc.words.dtypes import (
    canonical_dtype,
    resolve_kv_layout,
)
from mlacalc.words.errors import InvalidArgumentError, UnknownDtypeError

__all__ = [
    "FORMAT_BITS",
    "KEPT",
    "check_components",
    "component_of",
    "component_weight_bytes",
    "format_bits",
    "format_class",
    "fp8_block_bits",
    "kept_components",
]

#: Formats only one component's kernels run: the mixed-format MoE is a grouped kernel
_COMPONENT_ONLY = {"mxfp4_mxfp8": "experts"}

#: weight_breakdown's parts each component sizes.
_PART = {
    "attention": "attention",
    "dense_ffn": "dense_ffn",
    "experts": "routed_experts",
    "shared_experts": "shared_experts",
}


#: param_counts' breakdown entries a component's weights are counted in: a component whose
#: entries hold no parameter is not in the model (the routed experts of a dense model)
_PARAMS_OF = {
    "dense_ffn": ("dense_ffn",),
    "experts": ("moe_routed_experts",),
    "shared_experts": ("moe_shared_experts",),
}


def check_components(value: Any, m: ModelConfig | None = None) -> dict[str, str]:
    """``component_dtypes`` checked: a mapping of components to known formats (``m``: each
    component one the model has; a format for weights it lacks would change nothing)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(
            "component_dtypes",
            f"must map components ({', '.join(COMPONENTS)}) to formats, got {value!r}",
        )
    out = {}
    for comp, fmt in value.items():
        if comp not in COMPONENTS:
            raise InvalidArgumentError(
                "component_dtypes",
                f"unknown component {comp!r}; use one of {', '.join(COMPONENTS)}",
            )
        try:
            name = str(fmt).strip().lower()
            canonical_dtype(format_dtype(name))
        except UnknownDtypeError:
            raise InvalidArgumentError(
                "component_dtypes",
                f"{comp}: unknown format {fmt!r}; use a dtype (bf16, fp8, fp4, int4 ...) or "
                "nvfp4, mxfp4, mxfp4_mxfp8, fp8_block",
            ) from None
        only = _COMPONENT_ONLY.get(name)
        if only is not None and comp != only:
            raise InvalidArgumentError(
                "component_dtypes",
                f"{comp}: {name} is a format of the routed experts' grouped MoE kernel only "
                f"(w4a8_mxfp4); give it to {only}, or mxfp4 / nvfp4 here",
            )
        out[comp] = name
    if m is not None:
        _check_present(m, out)
    return out


def _check_present(m: ModelConfig, components: Mapping[str, str]) -> None:
    """Refuse a format for a component ``m`` has no weights in (experts of a dense model), and
    one for a head tied to the embedding: the engines compute its logits with the embedding's
    table as loaded (from recall: vLLM's and SGLang's model classes make ``lm_head`` the
    ``embed_tokens`` module, or pass that module to the logits processor, and neither's fp8
    quantization quantizes an embedding; TensorRT-LLM shares the embedding's weight with the
    head), so the head's format is the embedding's, timed and sized as one table."""
    if "head" in components and m.tie_word_embeddings:
        raise InvalidArgumentError(
            "component_dtypes",
            f"head: {m.label} ties its output head to the embedding (tie_word_embeddings) and "
            "the engines compute the logits with that one table as loaded, so the head is "
            "timed and sized in the embedding's format; leave the head's format out (give "
            "--embedding-dtype, component 'embeddings', to change both)",
        )
    breakdown = param_counts(m).breakdown
    for comp in components:
        if comp in _PARAMS_OF and not any(breakdown[k] for k in _PARAMS_OF[comp]):
            what = {"dense_ffn": "dense FFN layers", "experts": "routed experts"}
            raise InvalidArgumentError(
                "component_dtypes",
                f"{comp}: {m.label} has no {what.get(comp, 'shared experts')}, so a format "
                "for them would change nothing; leave it out",
            )


def component_of(name: str, part: str) -> str | None:
    """The component a serving-step kernel's weights belong to (None: norms, routers, the
    sampler, attention cores)."""
    if name.startswith("shared_experts"):
        return "shared_experts"
    if name == "routed_experts":
        return "experts"
    if name == "router":
        return None
    if name == "lm_head":
        return "head"
    if name == "embedding":
        return "embeddings"
    return {"layer": "attention", "dense_ffn": "dense_ffn"}.get(part)


#: Bits of a routed expert's bias (GPT-OSS's ``gate_up_proj_bias``, ``down_proj_bias``): bf16
#: in the checkpoint, kept so under any ``--expert-dtype`` (a bias is added to a GEMM's output,
#: never block-quantized with its weight).
BIAS_BITS = 16


def expert_bias_share(m: ModelConfig) -> float:
    """The share of the routed experts' parameters that are biases (0 for a model without
    them): every expert holds the same, so any GPU's experts hold this share of biases."""
    weights = biases = 0
    for t in tensors(m):
        if t.role == "experts":
            weights += t.numel
        elif t.role == "expert_bias":
            biases += t.numel
    return biases / (weights + biases) if biases else 0.0


@lru_cache(maxsize=64)
def fp8_block_bits(m: ModelConfig, component: str, include_mtp: bool = False) -> float:
    """Bits per weight of ``component``'s matrices in ``fp8_block`` (one fp8 byte a value and a
    float32 scale per 128 x 128 block, ``ceil(out/128) * ceil(in/128)`` a matrix, each expert's
    own): the checkpoint's exact bytes over its parameters, as DeepSeek-V3's fp8 export stores
    them; :data:`FORMAT_BITS`'s 8 + 1/512 where no side is ragged (no matrix of the component:
    that figure)."""
    bm, bn = FP8_BLOCK
    params = nbytes = 0
    for t in tensors(m, include_mtp=include_mtp):
        if len(t.shape) < 2 or COMPONENT_OF_PART.get(part_of(t.name)) != component:
            continue
        experts = t.shape[0] if len(t.shape) == 3 else 1
        out, inp = t.shape[-2], t.shape[-1]
        params += t.numel
        nbytes += t.numel + 4 * experts * -(-out // bm) * -(-inp // bn)
    return nbytes * 8 / params if params else FORMAT_BITS["fp8_block"]


def _bits(m: ModelConfig, component: str, fmt: str) -> float:
    """Bits per weight of ``component`` in ``fmt``, ``fp8_block``'s exact for the model."""
    return fp8_block_bits(m, component) if fmt == "fp8_block" else format_bits(fmt)


def component_weight_bytes(
    m: ModelConfig,
    lay: Layout,
    sized: str | None,
    components: Mapping[str, str],
    include_mtp: bool = False,
) -> dict[str, int]:
    """Bytes of weights on the fullest GPU by part (:func:`weight_bytes_by_part`), the named
    components in their formats; the embedding and the head, one part, split by their
    parameters."""
    out = dict(weight_bytes_by_part(m, lay, sized, include_mtp))
    if not components:
        return out
    params = weight_breakdown(m, lay, include_mtp)
    for comp, fmt in components.items():
        if comp in _PART and params.get(_PART[comp]):
            # fp8_block: a GPU's share of the component's exact bytes (a split on block
            # bounds holds its share exactly, as checkpoint_part_bytes says)
            bits = _bits(m, comp, fmt)
            nbytes = params[_PART[comp]] * bits / 8
            if comp == "attention" and bits < NORM_BITS:  # its norms keep 16 bits
                nbytes += float(attention_norm_params(m, lay, include_mtp)) * (NORM_BITS - bits) / 8
            if comp == "experts":  # their biases stay as stored: no format block-quantizes one
                bias = params[_PART[comp]] * expert_bias_share(m)
                nbytes += bias * (BIAS_BITS - bits) / 8
            out[_PART[comp]] = math.ceil(nbytes)
    emb, head = components.get("embeddings"), components.get("head")
    if (emb or head) and params.get("embedding_head"):
        b = param_counts(m).breakdown
        e_params = b["embedding"] + b["position_embedding"]
        total = e_params + b["lm_head"]
        share = e_params / total if total else 0.0
        base_bits = out["embedding_head"] * 8 / params["embedding_head"]
        bits_e = _bits(m, "embeddings", emb) if emb else base_bits
        bits_h = _bits(m, "head", head) if head else base_bits
        n = params["embedding_head"]
        out["embedding_head"] = math.ceil(n * (share * bits_e + (1 - share) * bits_h) / 8)
    return out


#: Engines that store a DSA model's fp8 latent cache in FlashMLA's sparse fp8 layout
#: (``fp8_ds_mla``: 512 fp8 values, 4 float32 scales and the 64 RoPE values in bf16, 656 B a
#: layer where plain fp8 is 576). vLLM: its page size for ``fp8_ds_mla`` is ``block_size x
#: 656`` (vLLM's ``vllm/v1/kv_cache_interface.py``) and, from
#: recall, DeepSeek-V3.2's config hook turns ``--kv-cache-dtype fp8`` into it. SGLang: its
#: NSA pool's ``override_kv_cache_dim`` for DeepSeek-V3.2's fp8 storage; that it is the same
#: 656 bytes is from recall. TensorRT-LLM: from recall, its MLA
#: cache holds the 576 values in the cache's dtype (one scale per tensor), as plain fp8 sizes.
DSA_FP8_LAYOUT_ENGINES = {"vllm": "vLLM", "sglang": "SGLang"}


def engine_kv_layout(m: ModelConfig, kv: Any, engine: str) -> tuple[Any, str]:
    """The KV layout ``engine`` stores for ``kv`` (a :class:`~mlacalc.words.dtypes.KVLayout`)
    on ``m``, and a note where it is not the one asked or the layout means something else
    there: plain fp8 on a DSA model under vLLM or SGLang is FlashMLA's ``fp8_ds_mla``; the
    DSA layout on a model without DSA is sized as asked and said."""
    dsa = m.index_topk is not None and m.is_mla
    if dsa and kv.name == "fp8" and engine in DSA_FP8_LAYOUT_ENGINES:
        return resolve_kv_layout("fp8_ds_mla"), (
            f"--kv-dtype fp8 on {m.label} (DSA) under {DSA_FP8_LAYOUT_ENGINES[engine]}: sized "
            "as the engine stores it, FlashMLA's sparse fp8 layout fp8_ds_mla "
            f"({_latent_row(m, 'fp8_ds_mla')} B a layer with its scales and bf16 RoPE, not "
            f"{_latent_row(m, 'fp8')})"
        )
    if kv.name == "fp8_ds_mla" and not dsa:
        return kv, (
            f"--kv-dtype fp8_ds_mla is FlashMLA's fp8 layout for sparse (DSA) MLA, which vLLM "
            f"stores for DSA models only; {m.label} has no DSA: sized as that layout anyway "
            f"({_latent_row(m, 'fp8_ds_mla')} B a latent row, plain fp8 "
            f"{_latent_row(m, 'fp8')})"
        )
    return kv, ""


def engine_fp8_cache_note(m: ModelConfig, kv: Any, seq_len: int, batch: int) -> str:
    """What ``report`` and ``compare`` say where they size a DSA model's cache in plain fp8
    (576 B a latent row) while vLLM and SGLang store it as ``fp8_ds_mla`` (656 B), as ``plan
    --engine vllm|sglang`` sizes it: that layout's bytes a token and at ``seq_len`` x
    ``batch``, and the option that counts it; ``""`` for any other model or layout."""
    if not (m.index_topk is not None and m.is_mla and kv.name == "fp8"):
        return ""
    here, ds = (kv_cache(m, seq_len, batch, name) for name in ("fp8", "fp8_ds_mla"))
    gib = 2**30
    return (
        f"{m.label} (DSA) with an fp8 cache: vLLM and SGLang store FlashMLA's fp8_ds_mla "
        f"layout ({_latent_row(m, 'fp8_ds_mla')} B a layer's latent row with its scales and "
        f"bf16 RoPE, where plain fp8 counts {_latent_row(m, 'fp8')}), "
        f"{ds.bytes_per_token:,} B a token and {ds.total_bytes / gib:.2f} GiB at seq_len "
        f"{seq_len:,} x batch {batch:,}, as plan --engine vllm|sglang sizes it; these figures "
        f"({here.bytes_per_token:,} B a token, {here.total_bytes / gib:.2f} GiB) are plain fp8, "
        "as TensorRT-LLM stores it (from recall); --kv-dtype fp8_ds_mla counts the engines' "
        "layout"
    )


def _latent_row(m: ModelConfig, layout: str) -> str:
    """Bytes of one layer's latent row of ``m`` in ``layout``, as text (``kv_lora_rank`` +
    ``qk_rope_head_dim``: 656 B for DeepSeek-V3 in fp8_ds_mla, 576 in fp8)."""
    rank, rope = m.kv_lora_rank or 0, m.qk_rope_head_dim or 0
    return f"{resolve_kv_layout(layout).row_bytes(rank, rope):,}"
