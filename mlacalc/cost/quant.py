"""Quantized checkpoints: exact weight bytes from a config's ``quantization_config``.

Parameter counts stay logical (unquantized, as Hugging Face counts them); this module
gives the bytes the checkpoint's tensors occupy, scales included, and names the
tensors that stay in the high-precision dtype, by the scheme
:mod:`mlacalc.models.quantization` reads (fp8 blocks, mxfp4 experts, integer groups).

A ModelOpt export's ``hf_quant_config.json`` read beside its ``config.json`` gives its scheme
(NVFP4, FP8 per tensor, mixed precision); without that file the checkpoint cannot be sized
from ``config.json`` alone: :func:`quantization_scheme` says so in its ``note`` and
:func:`quantized_weight_bytes` refuses it by name. :func:`component_precision` gives the
per-component record the serving planner reads.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase, translate
from functools import lru_cache
from typing import Any

from mlacalc.models.quantization import (
    COMPONENTS,
    ComponentPrecision,
    QuantScheme,
    format_dtype,
    quantization_scheme,
    scheme_of,
)
from mlacalc.models.tensors import Tensor, part_of, tensors
from mlacalc.words.dtypes import canonical_dtype, dtype_bits, weight_gemm_class
from mlacalc.words.errors import ConfigError

__all__ = [
    "COMPONENT_OF_PART",
    "FORMAT_BITS",
    "FP8_BLOCK",
    "KEPT",
    "ComponentPrecision",
    "QuantScheme",
    "QuantizedWeights",
    "Tensor",
    "checkpoint_kv_note",
    "checkpoint_part_bytes",
    "checkpoint_tensors",
    "checkpoint_weights",
    "component_precision",
    "format_bits",
    "format_class",
    "is_kept",
    "kept_components",
    "kept_head_format",
    "quantization_scheme",
    "quantized_weight_bytes",
    "scheme_of",
    "stored_weight_dtype",
    "tensor_bytes",
    "unmatched_modules",
]


@dataclass(frozen=True)
class QuantizedWeights:
    """Bytes of a quantized checkpoint's weights, split into quantized payload, scales and
    the tensors kept in the high-precision dtype (named in ``kept``)."""

    scheme: str
    total_bytes: int
    quantized_params: int
    payload_bytes: int
    scale_bytes: int
    kept_params: int
    kept_bytes: int
    kept: tuple[str, ...]
    note: str = ""
    description: str = ""
    kept_parts: tuple[str, ...] = ()
    #: modules a mixed-precision export lists in a format that name no tensor of the model
    #: (layer indices folded): their tensors, if the model has them under other names, are
    #: sized in bf16; empty where every listed module was found
    unmatched: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line for reports: ``fp8 block 128x128, 673.2 GB incl. 0.16 GB scales; bf16:
        embedding, norms, router, output head``, and the listed modules no tensor matched."""
        kept = ", ".join(self.kept_parts) or "nothing"
        line = (
            f"{self.description or self.scheme}, {self.total_bytes / 1e9:,.1f} GB incl. "
            f"{self.scale_bytes / 1e9:,.2f} GB scales; bf16: {kept}"
        )
        return line + self.unmatched_warning()

    def unmatched_warning(self) -> str:
        """``"; warning: ..."`` naming the listed modules no tensor matched, or ``""``."""
        if not self.unmatched:
            return ""
        shown = ", ".join(self.unmatched[:3]) + (", ..." if len(self.unmatched) > 3 else "")
        return (
            f"; warning: {len(self.unmatched)} quantized_layers name(s) match no tensor of "
            f"this layout ({shown}), their weights counted as kept"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "scheme": self.scheme,
            "description": self.description,
            "total_bytes": self.total_bytes,
            "quantized_params": self.quantized_params,
            "payload_bytes": self.payload_bytes,
            "scale_bytes": self.scale_bytes,
            "kept_params": self.kept_params,
            "kept_bytes": self.kept_bytes,
            "kept": list(self.kept),
            "kept_parts": list(self.kept_parts),
            "note": self.note,
            "unmatched": list(self.unmatched),
        }


_NEVER = re.compile(
    r"(embed|lm_head|norm|\.gate\.weight$|router|e_score_correction_bias|weights_proj)"
)


def _matches(pattern: str, module: str) -> bool:
    """``modules_to_not_convert`` semantics: a glob (``model.layers.*.self_attn``) matches
    the module or a parent of it; a plain name matches whole dotted components."""
    if "*" in pattern:
        rx = re.escape(pattern).replace(r"\*", r"[^.]*")
        return re.fullmatch(rx + r"(\..*)?", module) is not None
    return f".{pattern}." in f".{module}."


def _module(t: Tensor) -> str:
    """The module a tensor belongs to (a stacked expert tensor names its projection)."""
    return t.name if t.role == "experts" else t.name.rsplit(".", 1)[0]


def _glob(pattern: str, module: str) -> bool:
    """ModelOpt's ``exclude_modules`` semantics: an fnmatch glob over the whole name, which
    also covers the module's children."""
    return fnmatchcase(module, pattern) or fnmatchcase(module, pattern + ".*")


def _prefixes(module: str) -> list[str]:
    """The module and each of its parents (``a.b.c``, ``a.b``, ``a``)."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(len(parts), 0, -1)]


@lru_cache(maxsize=64)
def _globs(patterns: tuple[str, ...]) -> tuple[frozenset[str], re.Pattern | None]:
    """Exact names and one compiled expression for the wildcard patterns of a list (the
    checkpoint's thousands of tensors are matched against hundreds of names)."""
    exact = frozenset(p for p in patterns if not any(c in p for c in "*?["))
    wild = [p for p in patterns if p not in exact]
    if not wild:
        return exact, None
    body = "|".join(f"(?:{fnmatch_regex(p)})" for p in wild)
    return exact, re.compile(rf"(?:{body})(?:\..*)?\Z", re.DOTALL)


def fnmatch_regex(pattern: str) -> str:
    """The regular expression of one fnmatch glob (no anchors)."""
    return translate(pattern).removeprefix("(?s:").removesuffix(")\\Z")


def _matches_any(patterns: tuple[str, ...], module: str) -> bool:
    exact, wild = _globs(patterns)
    if exact and any(p in exact for p in _prefixes(module)):
        return True
    return wild is not None and wild.match(module) is not None


@lru_cache(maxsize=64)
def _per_module(
    pairs: tuple[tuple[str, str], ...],
) -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    """A mixed scheme's exact module names -> format (the first listing wins), and its
    wildcard entries in order."""
    exact: dict[str, str] = {}
    wild = []
    for module, fmt in pairs:
        if any(c in module for c in "*?["):
            wild.append((module, fmt))
        else:
            exact.setdefault(module, fmt)
    return exact, tuple(wild)


def tensor_format(t: Tensor, s: QuantScheme) -> str | None:
    """The format ``t`` is stored in under ``s`` (``nvfp4``, ``fp8``...), None when kept in
    the released dtype."""
    if s.method == "mixed":
        module = _module(t)
        if len(t.shape) < 2 or _matches_any(s.keep, module):
            return None
        exact, wild = _per_module(s.per_module)
        for name in _prefixes(module):
            if name in exact:
                return exact[name]
        return next((f for m, f in wild if _glob(m, module)), None)
    if is_kept(t, s):
        return None
    if t.role == "experts" and s.expert_format:
        return s.expert_format
    if s.method in ("awq", "gptq"):  # integer groups: the int4 / int8 weight-only kernels
        return f"int{s.bits}"
    return "fp8" if s.method == "fp8" else s.method


def is_kept(t: Tensor, s: QuantScheme) -> bool:
    if s.method == "mixed":
        return tensor_format(t, s) is None
    if t.role not in ("linear", "experts") or _NEVER.search(t.name):
        return True
    if s.experts_only and t.role != "experts":
        return True
    module = t.name.rsplit(".", 1)[0]
    if s.glob:
        return _matches_any(s.keep, _module(t))
    if any(_matches(k, module) for k in s.keep):
        return True
    return any(re.fullmatch(r, module) for r in s.keep_regex)


def _quantized(
    shape: tuple[int, ...], role: str, s: QuantScheme, fmt: str | None = None
) -> tuple[int, int]:
    """(payload bytes, scale bytes) of one quantized tensor (``fmt``: its format under a
    mixed scheme)."""
    experts = shape[0] if role == "experts" else 1
    out, inp = shape[-2], shape[-1]
    fmt = fmt or s.method
    if fmt in ("nvfp4", "w4a16_nvfp4"):
        # e2m1 pairs in bytes, an e4m3 scale per 16 values, float32 weight_scale_2 and,
        # with quantized activations, a float32 input_scale per matrix
        scalars = 4 + (4 if (fmt == "nvfp4" and (s.input_scale or s.method == "mixed")) else 0)
        return experts * out * (-(-inp // 2)), experts * (out * (-(-inp // 16)) + scalars)
    if fmt == "fp8_tensor":
        return experts * out * inp, experts * 8  # float32 weight_scale and input_scale
    if fmt == "mxfp4":  # e2m1 pairs in bytes, a ue8m0 (one-byte) scale per 32 along the row
        return experts * out * inp // 2, experts * out * (-(-inp // 32))
    if s.method == "fp8":
        bm, bn = s.block
        return experts * out * inp, experts * 4 * (-(-out // bm)) * (-(-inp // bn))
    if s.method == "mxfp4":
        return experts * out * inp // 2, experts * out * (-(-inp // 32))
    if s.method in ("awq", "gptq"):
        payload, scales = _awq_gptq_bytes(out, inp, s)
        return experts * payload, experts * scales
    # packed integer groups: 32 // bits values per int32 word along the row
    per_word = 32 // s.bits
    words = -(-inp // per_word)
    groups = -(-inp // s.group_size)
    scales = experts * out * groups * 2 * (1 if s.symmetric else 2)
    return experts * out * words * 4, scales + experts * 8  # + int32 weight_shape pair


def _awq_gptq_bytes(out: int, inp: int, s: QuantScheme) -> tuple[int, int]:
    """(payload bytes, scale bytes) of one ``[out, in]`` linear of an AWQ or GPTQ checkpoint,
    its tensors as the loaders store them (docs/model-families.md, "AWQ and GPTQ checkpoints"; the
    layouts from recall of AutoAWQ's ``WQLinear_GEMM`` / ``WQLinear_GEMV`` and AutoGPTQ's
    ``QuantLinear``), K = in, N = out, G = group_size, b = bits, 32 // b values an int32:

    - AWQ gemm: ``qweight`` int32 [K, N/8], ``qzeros`` int32 [K/G, N/8], ``scales`` fp16
      [K/G, N];
    - AWQ gemv: ``qweight`` int32 [N, K/8], ``qzeros`` int32 [N, w], ``scales`` fp16 [N, 8w],
      w = ceil(ceil(K/G / 8) / m) * m, m = 1, 2, 4 for G = 128, 64, 32 (the kernel's padding);
    - GPTQ: ``qweight`` int32 [K*b/32, N], ``qzeros`` int32 [K/G, N*b/32], ``scales`` fp16
      [K/G, N], ``g_idx`` int32 [K] (stored with or without desc_act; G = -1: G = K).

    Scales, zero points and g_idx are the scale bytes. A G that does not divide K is refused
    naming ``quantization_config.group_size``."""
    group = inp if s.group_size == -1 else s.group_size
    if inp % group:
        raise ConfigError(
            f"{group} does not divide a linear's {inp} input features (out {out}), so its "
            "groups are not whole",
            field="quantization_config.group_size",
            fix="use a group_size that divides every linear's in_features, or -1 (GPTQ)",
        )
    per_word = 32 // s.bits
    groups = inp // group
    if s.method == "gptq":
        qweight = -(-inp // per_word) * out * 4
        return qweight, groups * -(-out // per_word) * 4 + groups * out * 2 + inp * 4
    if s.layout == "gemv":
        mult = {128: 1, 64: 2, 32: 4}.get(group, 1)
        words = -(-groups // per_word)
        width = -(-words // mult) * mult
        return out * -(-inp // per_word) * 4, out * width * 4 + out * width * per_word * 2
    return inp * -(-out // per_word) * 4, groups * -(-out // per_word) * 4 + groups * out * 2


def tensor_bytes(t: Tensor, scheme: QuantScheme, kept_dtype_bytes: int = 2) -> tuple[int, int]:
    """(payload bytes, scale bytes) of one tensor stored as ``scheme``; a tensor the scheme
    keeps is all payload, at ``kept_dtype_bytes`` per value, with no scales."""
    fmt = tensor_format(t, scheme)
    if fmt is None:
        return t.numel * _kept_bytes(t, kept_dtype_bytes), 0
    return _quantized(t.shape, t.role, scheme, fmt)


def _kept_bytes(t: Tensor, kept_dtype_bytes: int) -> int:
    """Bytes of one value of a kept tensor: an int64 buffer's 8 (DeepSeek-V4's ``tid2eid``),
    else the released dtype's."""
    return 8 if t.role == "int64" else kept_dtype_bytes


def quantized_weight_bytes(
    tensors: Iterable[Tensor], scheme: QuantScheme, kept_dtype_bytes: int = 2
) -> QuantizedWeights:
    """Exact bytes of ``tensors`` stored as ``scheme`` (kept tensors at ``kept_dtype_bytes``)."""
    if scheme.method == "external":
        raise ConfigError(
            scheme.note,
            field="quantization_config",
            fix="give the scheme in config.json's quantization_config, or size the "
            "weights with weight_dtype",
        )
    tensors = list(tensors)
    q_params = payload = scales = kept_params = kept_bytes = 0
    kept: list[str] = []
    for t in tensors:
        fmt = tensor_format(t, scheme)
        if fmt is None:
            kept_params += t.numel
            kept_bytes += t.numel * _kept_bytes(t, kept_dtype_bytes)
            kept.append(t.name)
            continue
        p, s = _quantized(t.shape, t.role, scheme, fmt)
        q_params += t.numel
        payload += p
        scales += s
    return QuantizedWeights(
        scheme=scheme.method,
        total_bytes=payload + scales + kept_bytes,
        quantized_params=q_params,
        payload_bytes=payload,
        scale_bytes=scales,
        kept_params=kept_params,
        kept_bytes=kept_bytes,
        kept=tuple(_collapse(kept)),
        note=scheme.note,
        description=scheme.describe(),
        kept_parts=_kept_parts(tensors, kept),
        unmatched=unmatched_modules(tensors, scheme),
    )


def checkpoint_kv_note(model: Any, kv_name: str, kv_bits: float, engine: str | None = None) -> str:
    """The sentence every front end says where a checkpoint calibrated for an fp8 or NVFP4 KV
    cache (``kv_cache_quant_algo: FP8`` or ``NVFP4``, NVIDIA's ModelOpt exports) is sized with
    a wider one (the cache's layout ``kv_name`` of ``kv_bits`` bits an element), ``""``
    elsewhere: the cache is sized as asked, the default 16-bit for every engine
    (docs/serving.md: engines differ on which cache they give such a checkpoint by default);
    under ``engine`` ``"trtllm"`` it says that TensorRT-LLM takes the checkpoint's cache by
    default (from recall)."""
    scheme = getattr(model, "quantization", None)
    calibrated = getattr(scheme, "kv_cache", None)
    if calibrated not in _CALIBRATED_KV_BITS or kv_bits <= _CALIBRATED_KV_BITS[calibrated]:
        return ""
    said = (
        f"{model.label}'s checkpoint is calibrated for an {calibrated} KV cache (its "
        f"kv_cache_quant_algo); the cache is sized in {kv_name}, the kv_dtype asked or "
        f"defaulted: kv_dtype {calibrated} (--kv-dtype {calibrated}) sizes it so"
    )
    if engine == "trtllm":
        said += (
            f"; TensorRT-LLM serves such a checkpoint with the {calibrated} cache by default "
            "(its kv_cache_config dtype 'auto' reads kv_cache_quant_algo, from recall), so "
            f"--kv-dtype {calibrated} sizes what it runs"
        )
    return said


#: the KV caches a checkpoint may be calibrated for and their bits an element: a cache asked
#: wider than the checkpoint's gets :func:`checkpoint_kv_note`
_CALIBRATED_KV_BITS = {"fp8": 8, "nvfp4": 4}


def unmatched_modules(tensors: Iterable[Tensor], scheme: QuantScheme) -> tuple[str, ...]:
    """The modules a mixed-precision scheme lists in a format that match none of ``tensors``
    (a name no tensor's module is, or lies under, a glob no module matches), layer indices
    folded: an export whose names the layout does not know (``backbone.layers.N.mixer.``
    before it was read) would otherwise size those weights as kept, silently."""
    if scheme.method != "mixed":
        return ()
    modules = {_module(t) for t in tensors}
    under = {p for m in modules for p in _prefixes(m)}
    out = [
        name
        for name, _ in scheme.per_module
        if not (
            any(_glob(name, m) for m in modules) if any(c in name for c in "*?[") else name in under
        )
    ]
    return tuple(_collapse(out))


def _kept_parts(tensors: list[Tensor], kept: list[str]) -> tuple[str, ...]:
    """The parts of the model whose tensors a checkpoint keeps in bf16, in report words; a
    part it keeps only in part names the modules kept: DeepSeek-V3.1 NVFP4's attention keeps
    its q_a, q_b, kv_a and kv_b projections, its o_proj quantized ("attention in part
    (q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj)")."""
    kept_set = set(kept)
    # the parts of many modules (a label such as "norms" or "router" names what it keeps)
    quantized = {_kept_label(t.name) for t in tensors if t.name not in kept_set} & {
        "attention",
        "linear attention",
        "Mamba mixers",
        "dense MLP",
        "shared experts",
        "routed experts",
    }
    parts: dict[str, dict[str, None]] = {}
    for name in kept:
        modules = parts.setdefault(_kept_label(name), {})
        module, leaf = name.rsplit(".", 2)[-2:] if name.count(".") >= 2 else ("", name)
        # a module's weight by the module's name, a bare parameter (Mamba's A_log) by its own
        modules.setdefault(module if leaf in ("weight", "bias") else leaf)
    return tuple(
        f"{part} in part ({', '.join(modules)})" if part in quantized and modules else part
        for part, modules in parts.items()
    )


def _kept_label(name: str) -> str:
    """What a kept tensor is, in the words reports use (``norms``, ``router``, ...)."""
    leaf = name.rsplit(".", 1)[-1]
    if "embed" in name:
        return "embedding"
    if name.startswith("lm_head"):
        return "output head"
    if "norm" in name or name.endswith(".layer_scalar"):
        return "norms"
    if "router" in name or name.endswith(".gate.weight") or "correction_bias" in name:
        return "router"
    if name.endswith(".gate.tid2eid"):  # DeepSeek-V4's hash layers: the token-id table
        return "router"
    if "_hc." in name or name.startswith("model.hc_head."):
        return "hyper-connections"
    if ".indexer." in name:  # a DSA indexer's head weights (its norm is a norm, above)
        return "indexer head weights"
    if "bias" in leaf:
        return "biases"
    if "sinks" in leaf:
        return "attention sinks"
    if ".self_attn." in name:
        return "attention"
    if ".mamba." in name:
        return "Mamba mixers"
    if ".linear_attn." in name:
        return "linear attention"
    if "shared_expert" in name:
        return "shared experts"
    if ".experts." in name:
        return "routed experts"
    return "dense MLP"


def checkpoint_weights(model: Any, include_mtp: bool = False) -> QuantizedWeights | None:
    """The checkpoint bytes of a model that declares its quantization
    (``ModelConfig.quantization_config``), over its tensors (MTP modules too with
    ``include_mtp``); ``None`` for a model without one. Tensors the scheme keeps are
    sized in bf16, the released dtype of every quantized checkpoint modelled here."""
    if getattr(model, "quantization_config", None) is None:
        return None
    return _checkpoint_weights(model, bool(include_mtp))


@lru_cache(maxsize=32)
def _checkpoint_weights(model: Any, include_mtp: bool) -> QuantizedWeights:
    """:func:`checkpoint_weights`, once per model (models are frozen and hashable)."""
    return quantized_weight_bytes(checkpoint_tensors(model, include_mtp), model.quantization)


def checkpoint_tensors(model: Any, include_mtp: bool = False) -> list[Tensor]:
    """The model's checkpoint tensors; refused for a layout whose tensors are not listed
    (GPT-2, Falcon), naming ``quantization_config``."""
    if model.family in ("gpt2", "falcon"):
        raise ConfigError(
            f"checkpoint quantization is modelled for the Llama, DeepSeek and MiniCPM3 "
            f"layouts, not {model.family}",
            source=model.origin,
            field="quantization_config",
            fix="remove quantization_config to size the weights with weights_dtype",
        )
    ts = tensors(model, include_mtp=include_mtp)
    _check_whole_groups(model, ts)
    return ts


def _check_whole_groups(model: Any, ts: list[Tensor]) -> None:
    """An AWQ or GPTQ checkpoint whose ``group_size`` does not divide a quantized linear's input
    features is refused naming the config file, the field and the first such tensor (the
    sizing itself, :func:`_awq_gptq_bytes`, cannot name the file)."""
    s = model.quantization
    if s is None or s.method not in ("awq", "gptq") or s.group_size in (None, -1):
        return
    for t in ts:
        if t.shape[-1] % s.group_size and tensor_format(t, s) is not None:
            raise ConfigError(
                f"{s.group_size} does not divide {t.name}'s {t.shape[-1]} input features, so "
                "its groups are not whole",
                source=model.origin,
                field="quantization_config.group_size",
                fix="use a group_size that divides every quantized linear's in_features"
                + (", or -1 (one group a row)" if s.method == "gptq" else ""),
            )


def checkpoint_part_bytes(model: Any) -> dict[str, tuple[int, int]] | None:
    """Parameters and checkpoint bytes by part of the model, ``part -> (params, bytes)``,
    with the parts of :func:`mlacalc.param_counts`'s breakdown (``embedding``, ``lm_head``,
    ``attention``, ``norms``, ``dense_ffn``, ``moe_routed_experts``, ``moe_shared_experts``,
    ``moe_router``) plus ``mtp`` for the MTP modules; ``None`` without a quantization.

    A layout that splits a part over GPUs holds that part's bytes in proportion to its
    parameters: exact for whole experts, and for a matrix split on scale-block bounds."""
    scheme = getattr(model, "quantization", None)
    if scheme is None:
        return None
    main = checkpoint_tensors(model)
    every = checkpoint_tensors(model, include_mtp=True) if model.num_nextn_predict_layers else main
    out: dict[str, list[int]] = {}
    for i, t in enumerate(every):
        part = part_of(t.name) if i < len(main) else "mtp"
        payload, scales = tensor_bytes(t, scheme)
        acc = out.setdefault(part, [0, 0])
        acc[0] += t.numel
        acc[1] += payload + scales
    return {k: (v[0], v[1]) for k, v in out.items()}


def _collapse(names: list[str]) -> list[str]:
    """Projection names with layer indices folded (``model.layers.*.self_attn.q_proj.weight``)."""
    seen: dict[str, None] = {}
    for n in names:
        seen[re.sub(r"\.\d+\.", ".*.", n)] = None
    return list(seen)


#: the parts of :func:`mlacalc.models.tensors.part_of` -> the components of ComponentPrecision
COMPONENT_OF_PART = {
    "attention": "attention",
    "dense_ffn": "dense_ffn",
    "moe_routed_experts": "experts",
    "moe_shared_experts": "shared_experts",
    "embedding": "embeddings",
    "lm_head": "head",
}


def component_precision(model: Any, include_mtp: bool = False) -> ComponentPrecision:
    """Each part of the model's checkpoint in its stored format, with its parameters, and the
    KV-cache dtype the checkpoint is calibrated for (:class:`ComponentPrecision`).

    A model without a quantization holds every component in its ``weights_dtype``; a model
    that declares one (``quantization_config``, or ModelOpt's ``hf_quant_config.json`` read
    beside its ``config.json``) has each tensor in the scheme's format or, where the scheme
    keeps it, in bf16. Norms, routers and biases are not components."""
    scheme = getattr(model, "quantization", None)
    released = getattr(model, "weights_dtype", "bf16") or "bf16"
    if scheme is None or scheme.method == "external":
        source = "weights_dtype" if scheme is None else "weights_dtype (" + scheme.note + ")"
        kept_fmt, scheme = released, None
    else:
        source, kept_fmt = f"quantization_config: {scheme.describe()}", "bf16"
    out: dict[str, dict[str, int]] = {}
    for t in tensors(model, include_mtp=include_mtp):
        component = COMPONENT_OF_PART.get(part_of(t.name))
        if component is None or len(t.shape) < 2:
            continue
        fmt = (tensor_format(t, scheme) if scheme is not None else None) or kept_fmt
        acc = out.setdefault(component, {})
        acc[fmt] = acc.get(fmt, 0) + t.numel
    ordered = {c: out[c] for c in COMPONENTS if c in out}
    kv = scheme.kv_cache if scheme is not None else None
    return ComponentPrecision(weights=ordered, kv_cache=kv, source=source)


#: Bits per weight of formats whose scales add to their elements (``fp8_block``: one float32
#: per 128 x 128 block where both sides divide by 128; a component's exact figure, every block
#: counted whole, is :func:`mlacalc.serving.precision.fp8_block_bits`).
FORMAT_BITS = {
    "nvfp4": 4.5,
    "w4a16_nvfp4": 4.5,
    "mxfp4": 4.25,
    "mxfp4_mxfp8": 4.25,
    "fp8_block": 8 + 32 / (128 * 128),
}

#: the block of ``fp8_block`` asked per component (DeepSeek-V3's ``weight_block_size``)
FP8_BLOCK = (128, 128)

#: Formats whose kernels are a class of their own, not their weights' dtype's, as ``(GEMM
#: class, grouped MoE class)``: MXFP4 weights with activations quantized to MXFP8 run the
#: mixed-format MoE (TensorRT-LLM-gen's on Blackwell, the measured ``w4a8_mxfp4`` rows);
#: MXFP4 weights under bf16 activations (GPT-OSS's checkpoint, which ``--expert-dtype mxfp4``
#: names) the weight-only kernels, the MoE the measured ``w4a16_mxfp4`` rows, as the checkpoint
#: read as stored runs (:func:`mlacalc.cost.model_step.stored_dtype`); NVFP4 weights under bf16
#: activations the weight-only ``w4a16``. ``nvfp4`` and ``fp4`` quantize their activations too:
#: the fp4 GEMMs and MoE.
_FORMAT_CLASS = {
    "fp8_block": ("fp8_block", "fp8_block"),  # the block-scaled fp8 GEMM and MoE
    "mxfp4_mxfp8": ("w4a8_mxfp4", "w4a8_mxfp4"),
    "mxfp4": ("w4a16", "w4a16_mxfp4"),
    "w4a16_nvfp4": ("w4a16", "w4a16"),
}


def format_bits(fmt: str) -> float:
    """Bits per weight of a format, scales included."""
    return FORMAT_BITS.get(fmt, dtype_bits(format_dtype(fmt)))


def format_class(fmt: str, moe: bool = False) -> str:
    """The GEMM class (``moe``: the grouped MoE class) a product by weights in ``fmt`` runs
    in."""
    if fmt in _FORMAT_CLASS:
        return _FORMAT_CLASS[fmt][moe]
    return weight_gemm_class(canonical_dtype(format_dtype(fmt)), "bf16")


#: Components a weight dtype asked for leaves in the checkpoint's format: the embedding (a
#: gather, no GEMM) and the output head. The engines quantize a layer's linear weights only
#: when asked for fp8/int8/fp4 and keep the head in the model's dtype unless told otherwise
#: (from recall: TensorRT-LLM's ModelOpt FP8 and NVFP4 configs exclude ``*lm_head*``; vLLM's
#: fp8 and compressed-tensors skip ``lm_head`` unless asked; SGLang likewise); quantized
#: checkpoints say so too (DeepSeek-V3's fp8 stores them bf16; ModelOpt exports list
#: ``lm_head`` in ``exclude_modules``). ``--head-dtype`` quantizes the head.
KEPT = ("embeddings", "head")


@lru_cache(maxsize=64)
def _stored_format(m: Any, component: str) -> str | None:
    """The format most of a component's weights are stored in (None: the model has none)."""
    formats = component_precision(m).weights.get(component)
    return max(formats, key=formats.__getitem__) if formats else None


def kept_components(
    m: Any, weight_dtype: str | None, components: Mapping[str, str]
) -> dict[str, str]:
    """``components`` with the embedding and the head (:data:`KEPT`) in their stored format
    where a weight dtype is asked (not None: the checkpoint's own) that quantizes, below 16
    bits, and has fewer bits than it, and neither is named: a quantization reaches the
    layers' linear weights only. A 16-bit dtype is a cast, which an engine applies to every
    tensor (GPT-2's fp32 embedding served in bf16 is bf16)."""
    out = dict(components)
    if weight_dtype is None:
        return out
    bits = format_bits(str(weight_dtype).lower())
    if bits >= 16:  # a cast, not a quantization
        return out
    for comp in KEPT:
        fmt = _stored_format(m, comp)
        if comp not in out and fmt is not None and format_bits(fmt) > bits:
            out[comp] = fmt
    return out


def kept_head_format(m: Any, weight_dtype: str | None) -> str | None:
    """The format the output head's GEMM reads its weights in under ``weight_dtype`` asked
    (:func:`kept_components`: the head's stored format where it has more bits; a head tied to
    the embedding reads the embedding's table, so that one's), or None: in ``weight_dtype``.
    The one rule the model step (:func:`mlacalc.cost.model_step.step_kernels`: roofline,
    predict_time) and the served step (plan, search, the app) time the head by."""
    kept = kept_components(m, weight_dtype, {})
    if getattr(m, "tie_word_embeddings", False):
        return kept.get("embeddings")
    return kept.get("head")


#: storage formats that keep a weight as released (not quantized)
_UNQUANTIZED = ("bf16", "fp16", "fp32")


def stored_weight_dtype(m: Any) -> str | None:
    """The dtype a quantized checkpoint stores its quantized weights in: ``fp4`` for an NVFP4
    or MXFP4 export (gpt-oss's experts), ``fp8`` for a block-fp8 one (the one holding the most
    parameters where a mixed export has two); the ``weight_dtype`` a plan sized and timed as
    the checkpoint stores it reports, in the API (``Plan.weight_dtype``) as in the CLI's JSON.
    None without a checkpoint scheme read (the weights are then the model's
    ``weights_dtype``)."""
    scheme = getattr(m, "quantization", None)
    if scheme is None or scheme.method == "external":
        return None
    try:
        hash(m)
    except TypeError:  # a model object that cannot key a cache: read every tensor again
        return _stored_weight_dtype.__wrapped__(m)
    return _stored_weight_dtype(m)


@lru_cache(maxsize=64)
def _stored_weight_dtype(m: Any) -> str | None:
    """:func:`stored_weight_dtype` of a quantized checkpoint, kept per model: it reads every
    tensor of the model (DeepSeek-V3's fp8 export: ~80 ms), and a search asks it of each
    candidate layout (~100 times a search of 4-16 GPUs, a third of its time)."""
    params: dict[str, int] = {}
    for formats in component_precision(m).weights.values():
        for fmt, n in formats.items():
            dtype = format_dtype(fmt)
            if dtype not in _UNQUANTIZED:
                params[dtype] = params.get(dtype, 0) + n
    return max(params, key=params.__getitem__) if params else None
