"""The words mlacalc speaks, written once: phases, implementations, stages, variants, quantities.

Every other module (engine, formulas, front ends, validation) takes its names from here, so
that adding a phase or an implementation is one edit. This module imports nothing from the
package (and nothing outside the standard library), so any module may import it.

>>> serving_impl("decode"), serving_impl("prefill"), serving_impl("chunk"), serving_impl(None)
('absorbed', 'naive', 'compressed', 'absorbed')
>>> FIELD_SYMBOLS["kv_lora_rank"]
'd_c'
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "ABSORBED_IMPLS",
    "BENCH_SCHEMA",
    "ELEMENTWISE_STAGES",
    "FIELD_SYMBOLS",
    "IMPLEMENTATIONS",
    "LATENT_CACHE_IMPLS",
    "MATMUL_STAGES",
    "MHA_FIELD_SYMBOLS",
    "MLA_FIELD_SYMBOLS",
    "MLA_IMPLEMENTATIONS",
    "MODES",
    "NORM_FLOPS_PER_ELEMENT",
    "PHASES",
    "QUANTITIES",
    "REPORT_SCHEMA",
    "ROOFLINE_SCHEMA",
    "ROPE_FLOPS_PER_ELEMENT",
    "SCOPES",
    "SERVING_MODES",
    "SOFTMAX_FLOPS_PER_ELEMENT",
    "STAGES",
    "STANDARD_IMPL",
    "SWEEP_QUANTITIES",
    "VALIDATE_SCHEMA",
    "VARIANTS",
    "VERSION_KEY",
    "Impl",
    "MlaImpl",
    "Mode",
    "Phase",
    "Scope",
    "Stage",
    "Variant",
    "cache_kind",
    "caches_latent",
    "layer_key",
    "serving_impl",
    "stamped",
    "tool_version",
]

# -- phases of a step -------------------------------------------------------------------------

#: ``prefill``: ``q = S`` new tokens; ``decode``: one new token attending ``S`` keys;
#: ``chunk``: ``q_len`` new tokens, the last attending ``S`` keys.
Phase = Literal["prefill", "decode", "chunk"]
PHASES: tuple[Phase, ...] = ("prefill", "decode", "chunk")

# -- implementations ----------------------------------------------------------------------------

#: How an MLA layer runs (what the cache holds and what each step computes).
MlaImpl = Literal["naive", "compressed", "absorbed", "absorbed_merged"]
MLA_IMPLEMENTATIONS: tuple[MlaImpl, ...] = ("naive", "compressed", "absorbed", "absorbed_merged")
#: The one implementation of MHA, GQA and MQA.
STANDARD_IMPL: Literal["standard"] = "standard"
Impl = Literal["naive", "compressed", "absorbed", "absorbed_merged", "standard"]
#: Every implementation name a caller may pass.
IMPLEMENTATIONS: tuple[Impl, ...] = (*MLA_IMPLEMENTATIONS, STANDARD_IMPL)
#: MLA implementations whose cache is the latent ``c_kv`` plus the shared RoPE key.
LATENT_CACHE_IMPLS: tuple[MlaImpl, ...] = ("compressed", "absorbed", "absorbed_merged")
#: MLA implementations whose attention runs in latent space (``W_UK`` absorbed into the query).
ABSORBED_IMPLS: tuple[MlaImpl, ...] = ("absorbed", "absorbed_merged")


def caches_latent(is_mla: bool, impl: str | None) -> bool:
    """Whether a layer's cache holds the MLA latent: every MLA implementation but ``naive``,
    and the serving default (``impl=None``), which keeps the latent in every phase."""
    return is_mla and (impl is None or impl in LATENT_CACHE_IMPLS)


def cache_kind(is_mla: bool, impl: str | None) -> str:
    """What a layer's cache holds, as results say it beside ``impl``: ``"latent"`` (MLA's
    ``c_kv`` and RoPE key: every implementation but ``naive``, and the serving default),
    ``"expanded"`` (MLA's per-head K and V: ``impl="naive"`` named), ``"kv"`` (MHA, GQA,
    MQA). The serving default's prompt runs ``naive`` FLOPs over the latent cache, so its
    ``impl`` alone does not tell the caches apart.

    >>> cache_kind(True, None), cache_kind(True, "naive"), cache_kind(False, "standard")
    ('latent', 'expanded', 'kv')
    """
    if not is_mla:
        return "kv"
    return "latent" if caches_latent(is_mla, impl) else "expanded"


def serving_impl(phase: str | None) -> MlaImpl:
    """The MLA implementation serving engines run when none is named (``impl=None``), before
    an engine's own choice (vLLM's short prompts down its decode path:
    :func:`mlacalc.timemodel.mla_time.decode_path_tokens`).

    The cache is the latent in every case. A prompt (``"prefill"``, no key cached before
    it) expands K and V from the latent of its own tokens (``"naive"`` FLOPs: the expanded
    rows are those tokens', never a cache read); a ``"chunk"`` after a cached prefix expands
    the prefix's latent rows through ``kv_b_proj`` too (``"compressed"``: what TensorRT-LLM's
    and vLLM's chunked-context paths run, and SGLang's at a long prefix); decode runs
    ``"absorbed"``. ``phase=None`` (no step, e.g. a cache size) means decode.
    """
    if phase in (None, "decode"):
        return "absorbed"
    return "compressed" if phase == "chunk" else "naive"


def layer_key(is_mla: bool, impl: str, q_lora: bool) -> str:
    """Name of the generated evaluators of a layer (``mha``, ``mla_absorbed_qlora``, ...)."""
    if not is_mla:
        return "mha"
    return f"mla_{impl}_{'qlora' if q_lora else 'noqlora'}"


# -- stages of the FLOP breakdown ---------------------------------------------------------------

Stage = Literal["q_proj", "kv_proj", "kv_up", "absorb", "core", "o_proj"]
#: Stages of the matmul FLOP breakdown: projections, attention core, output projection.
MATMUL_STAGES: tuple[Stage, ...] = ("q_proj", "kv_proj", "kv_up", "absorb", "core", "o_proj")
STAGES = MATMUL_STAGES
#: Element-wise work of an attention layer, reported apart from matmul FLOPs.
ELEMENTWISE_STAGES = ("norm", "rope", "softmax", "cache", "layout")

#: Nominal FLOPs per element of the element-wise ops (reported apart, never added to matmul
#: FLOPs): softmax = max, subtract, exp, sum, divide; RoPE = 2 multiplies + 1 add per rotated
#: element; RMSNorm = square, sum, scale, weight.
SOFTMAX_FLOPS_PER_ELEMENT = 5
ROPE_FLOPS_PER_ELEMENT = 3
NORM_FLOPS_PER_ELEMENT = 4

# -- attention variants -------------------------------------------------------------------------

Variant = Literal["mha", "gqa", "mqa", "mla"]
VARIANTS: tuple[Variant, ...] = ("mha", "gqa", "mqa", "mla")

# -- quantities ---------------------------------------------------------------------------------

#: quantity -> what its symbolic formula gives (:func:`mlacalc.formula`)
QUANTITIES: dict[str, str] = {
    "kv_cache_elements": "cached elements per token per layer",
    "kv_cache_bytes": (
        "cache bytes of all L layers for B sequences of S tokens (b bytes per element)"
    ),
    "attention_params": "parameters of one attention layer (biases off unless bias=True)",
    "attention_flops": "matmul FLOPs of the attention blocks of all L layers for one step",
    "elementwise_flops": "nominal element-wise FLOPs (softmax, RoPE, norms) of all L layers",
    "unfused_bytes": "bytes the op-by-op sequence reads and writes, all L layers",
    "fused_bytes": "ideal fused lower bound of bytes moved, all L layers",
}
#: Quantities :func:`mlacalc.sweep` evaluates over arrays.
SWEEP_QUANTITIES = ("kv_cache_bytes", "attention_flops", "fused_bytes", "unfused_bytes")

# -- roofline modes and scopes ------------------------------------------------------------------

#: ``fused``: ideal lower bound of kernels a serving engine fuses; ``unfused``: the op-by-op
#: sequence the microbenchmark runs.
Mode = Literal["fused", "unfused"]
MODES: tuple[Mode, ...] = ("fused", "unfused")
#: How a deployment serves: prefill and decode on the same GPUs, or in separate pools.
SERVING_MODES = ("aggregated", "disaggregated")
#: ``attention_layer``: one attention layer; ``model``: a whole forward step.
Scope = Literal["attention_layer", "model"]
SCOPES: tuple[Scope, ...] = ("attention_layer", "model")

# -- config fields and the formula symbols they set ---------------------------------------------

#: Config field -> the symbol of the formulas it sets (all variants).
FIELD_SYMBOLS: dict[str, str] = {
    "hidden_size": "d",
    "num_attention_heads": "n_h",
    "num_key_value_heads": "n_kv",
    "head_dim": "d_h",
    "kv_lora_rank": "d_c",
    "q_lora_rank": "d_cq",
    "qk_nope_head_dim": "d_nope",
    "qk_rope_head_dim": "d_rope",
    "v_head_dim": "d_v",
    "num_hidden_layers": "L",
}
_MHA_ONLY = ("num_key_value_heads", "head_dim")
_MLA_ONLY = ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
#: The fields of MHA, GQA and MQA and their symbols.
MHA_FIELD_SYMBOLS: dict[str, str] = {k: v for k, v in FIELD_SYMBOLS.items() if k not in _MLA_ONLY}
#: The fields of multi-head latent attention and their symbols.
MLA_FIELD_SYMBOLS: dict[str, str] = {k: v for k, v in FIELD_SYMBOLS.items() if k not in _MHA_ONLY}

# -- schema strings of the files and documents mlacalc writes -----------------------------------

#: ``mlacalc report --format json`` documents.
REPORT_SCHEMA = "mlacalc.report/1"
#: Microbenchmark measurement sets (CSV rows + JSON sidecar).
BENCH_SCHEMA = "mlacalc.bench/1"
#: ``mlacalc validate --format json`` documents.
VALIDATE_SCHEMA = "mlacalc.validate/1"
#: ``mlacalc roofline --format json`` documents.
ROOFLINE_SCHEMA = "mlacalc.roofline/1"
#: The key every JSON document mlacalc writes names the tool's version under
#: (``mlacalc.__version__``, the installed package's), beside its ``schema``
VERSION_KEY = "mlacalc_version"


_VERSION: list[str] = []


def tool_version() -> str:
    """``mlacalc.__version__``: the installed package's version, ``"0.0.0+unknown"`` for a
    source tree that is not installed (read once: importlib.metadata is slow to import)."""
    if not _VERSION:
        # deferred: importlib.metadata is slow to import
        from importlib import metadata

        try:
            _VERSION.append(metadata.version("mlacalc"))
        except metadata.PackageNotFoundError:
            _VERSION.append("0.0.0+unknown")
    return _VERSION[0]


def stamped(doc: dict, profile_digest: str | None = None) -> dict:
    """``doc`` with :data:`VERSION_KEY` (after its ``schema``, first where it has none) and,
    where a profile timed it, ``profile_digest`` (:attr:`Profile.digest
    <mlacalc.timemodel.profile.Profile.digest>`); keys it holds already are kept."""
    out: dict = {}
    if "schema" in doc:
        out["schema"] = doc["schema"]
    out[VERSION_KEY] = doc.get(VERSION_KEY) or tool_version()
    out.update(doc)
    if profile_digest and "profile_digest" not in out:
        out["profile_digest"] = profile_digest
    return out
