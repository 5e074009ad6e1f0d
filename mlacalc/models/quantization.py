"""A checkpoint's quantization scheme, read from its ``quantization_config``.

:func:`quantization_scheme` reads what a ``config.json`` declares (``None`` for an unquantized
checkpoint) and :func:`scheme_of` checks one ``quantization_config`` value; the schema and the
Hugging Face import use them to validate and record a model's scheme, and
:mod:`mlacalc.cost.quant` sizes the checkpoint's tensors by it. The schemes:
- ``fp8`` with block scales (DeepSeek-V3/V3.2, Kimi K2, MiniMax-M2): each projection
  matrix ``[out, in]`` is stored as 1-byte e4m3 values plus one float32 scale per
  ``weight_block_size`` block, ``ceil(out/bm) * ceil(in/bn)`` scales; embeddings, the
  output head, norms, biases, MoE routers and ``modules_to_not_convert`` stay bf16.
- ``mxfp4`` (GPT-OSS): the routed experts' matrices in 4-bit values (two per byte)
  with one 1-byte power-of-two scale per 32 values; ``modules_to_not_convert``
  (attention, router, embedding, head) and every bias stay bf16.
- ``compressed-tensors`` integer groups (Kimi K2 Thinking / K2.5 int4): the targeted
  ``Linear`` matrices in ``num_bits`` packed into int32 words, one bf16 scale per
  ``group_size`` values of a row (a zero point too when asymmetric), and the int32
  ``weight_shape`` pair of each packed matrix; ``ignore`` patterns stay bf16.

- ``nvfp4`` (NVIDIA ModelOpt ``quant_algo: NVFP4``, compressed-tensors ``nvfp4-pack-quantized``):
  each targeted matrix ``[out, in]`` in 4-bit floats (two per byte), one fp8 (e4m3) scale per
  ``group_size`` (16) values of a row, and per matrix one float32 global scale
  (``weight_scale_2``) and, when activations are quantized too (NVFP4, not W4A16_NVFP4), one
  float32 ``input_scale``; ``exclude_modules`` (``ignore``) stay bf16.
- ``fp8_tensor`` (ModelOpt ``quant_algo: FP8``): 1-byte e4m3 values with one float32
  ``weight_scale`` and one float32 ``input_scale`` per matrix.
- ``mixed`` (ModelOpt ``quant_algo: MIXED_PRECISION``): each module listed in
  ``quantized_layers`` in its own algorithm (FP8, NVFP4, W4A16_NVFP4), every other one bf16.

ModelOpt exports keep the scheme in ``hf_quant_config.json`` beside ``config.json``
(:func:`modelopt_config` turns it into the ``quantization_config`` the loader records); a
checkpoint whose name marks such an export but whose ``hf_quant_config.json`` is not at hand
is recorded as the ``external`` scheme with a note saying that its weights are then sized by
a dtype (:func:`external_quantization`).

:class:`ComponentPrecision` is the per-component record the serving planner reads: the format
of the attention, dense FFN, routed and shared experts, embedding and head weights (with the
parameters in each format) and the KV-cache dtype the checkpoint was calibrated for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlacalc.words.errors import ConfigError

__all__ = [
    "COMPONENTS",
    "ComponentPrecision",
    "QuantScheme",
    "external_quantization",
    "format_dtype",
    "language_model_name",
    "modelopt_config",
    "quantization_scheme",
    "scheme_of",
]

#: the parts of a checkpoint :class:`ComponentPrecision` names, in report order
COMPONENTS = ("attention", "dense_ffn", "experts", "shared_experts", "embeddings", "head")

#: storage format -> the dtype name of :mod:`mlacalc.words.dtypes` its GEMMs run in
_FORMAT_DTYPE = {
    "bf16": "bf16",
    "fp16": "fp16",
    "fp32": "fp32",
    "fp8": "fp8",
    "fp8_tensor": "fp8",
    "fp8_block": "fp8",  # asked per component: fp8 values, a float32 scale per 128 x 128 block
    "nvfp4": "fp4",
    "w4a16_nvfp4": "fp4",
    "mxfp4": "fp4",
    "mxfp4_mxfp8": "fp4",  # MXFP4 weights, activations quantized to MXFP8 (w4a8 MXFP4)
    "int4": "int4",
    "int8": "int8",
    "int2": "int4",
}


def format_dtype(fmt: str) -> str:
    """The dtype (:data:`mlacalc.words.dtypes.DTYPE_BITS` name) of a storage format: the
    weights' element type a GEMM reads (``nvfp4`` -> ``fp4``, ``fp8_tensor`` -> ``fp8``)."""
    return _FORMAT_DTYPE.get(fmt, fmt)


@dataclass(frozen=True)
class ComponentPrecision:
    """How each part of a checkpoint is stored, for the serving planner.

    ``weights`` maps each of :data:`COMPONENTS` the model has to ``{format: parameters}``:
    formats are ``bf16`` (or the released dtype), ``fp8`` (block scales), ``fp8_tensor``,
    ``nvfp4``, ``w4a16_nvfp4``, ``mxfp4``, ``int4`` ...; a component split between formats
    (DeepSeek-V3.1 NVFP4 keeps its MTP layer's experts in bf16) lists each with its
    parameters. ``kv_cache`` is the KV-cache dtype the checkpoint was calibrated for
    (``"fp8"`` or ``"nvfp4"`` from ModelOpt's ``kv_cache_quant_algo``, ``"fp8"`` from a
    ``kv_cache_scheme``), ``None``
    when it states none (the engine's choice). ``source`` says where it was read.
    Norms, routers and biases are not components: they stay in the released dtype.
    """

    weights: Mapping[str, Mapping[str, int]]
    kv_cache: str | None = None
    source: str = ""

    def format_of(self, component: str) -> str | None:
        """The format holding most of ``component``'s parameters (None when absent)."""
        formats = self.weights.get(component)
        if not formats:
            return None
        return max(formats.items(), key=lambda kv: (kv[1], kv[0]))[0]

    def dtype_of(self, component: str) -> str | None:
        """The dtype a GEMM of ``component`` reads its weights in (``fp4``, ``fp8``, ``bf16``)."""
        fmt = self.format_of(component)
        return None if fmt is None else format_dtype(fmt)

    def describe(self) -> str:
        """One line: ``attention bf16, experts nvfp4, ...; KV cache fp8``."""
        parts = []
        for name in COMPONENTS:
            formats = self.weights.get(name)
            if formats:
                shown = "+".join(f for f, _ in sorted(formats.items(), key=lambda kv: -kv[1]))
                parts.append(f"{name} {shown}")
        kv = f"; KV cache {self.kv_cache}" if self.kv_cache else ""
        return ", ".join(parts) + kv

    def to_dict(self) -> dict[str, Any]:
        return {
            "weights": {k: dict(v) for k, v in self.weights.items()},
            "formats": {k: self.format_of(k) for k in self.weights},
            "kv_cache": self.kv_cache,
            "source": self.source,
        }


@dataclass(frozen=True)
class QuantScheme:
    """A checkpoint's quantization, read from ``quantization_config``."""

    method: str  # "fp8", "mxfp4", "int4", ... or "external"
    block: tuple[int, int] | None = None
    group_size: int | None = None
    bits: int = 16
    symmetric: bool = True
    experts_only: bool = False
    keep: tuple[str, ...] = ()  # substrings: modules left unquantized
    keep_regex: tuple[str, ...] = ()
    note: str = ""
    glob: bool = False  # keep patterns are fnmatch globs over whole names (ModelOpt)
    input_scale: bool = False  # a float32 input_scale per matrix (activations quantized)
    per_module: tuple[tuple[str, str], ...] = ()  # (module glob, format): mixed precision
    kv_cache: str | None = None  # the KV-cache dtype the checkpoint is calibrated for
    #: the routed experts' format where it differs from the method's (DeepSeek-V4's fp8
    #: checkpoint with ``expert_dtype: fp4``: e2m1 pairs, a ue8m0 scale per 32 values)
    expert_format: str | None = None
    #: an AWQ or GPTQ checkpoint's tensor layout: ``gemm`` / ``gemv`` (AWQ's ``version``),
    #: ``gptq`` (``desc_act`` noted as ``gptq desc_act``: same tensors, g_idx reordered)
    layout: str = ""

    def describe(self) -> str:
        """The scheme in a few words, as reports name it (``fp8 block 128x128``)."""
        if self.method == "fp8" and self.expert_format:
            return f"fp8 block {self.block[0]}x{self.block[1]}, {self.expert_format} experts"
        if self.method == "fp8":
            return f"fp8 block {self.block[0]}x{self.block[1]}"
        if self.method == "mxfp4":
            return "mxfp4 experts"
        if self.method == "external":
            return "external (hf_quant_config.json)"
        if self.method == "nvfp4":
            kind = "nvfp4" if self.input_scale else "w4a16 nvfp4"
            return f"{kind} group {self.group_size}"
        if self.method == "fp8_tensor":
            return "fp8 per-tensor"
        if self.method == "mixed":
            kinds = sorted({f for _, f in self.per_module})
            return "mixed " + "/".join(kinds)
        if self.method in ("awq", "gptq"):
            group = "per channel" if self.group_size == -1 else f"group {self.group_size}"
            layout = self.layout if self.method == "gptq" else f"awq {self.layout}"
            return f"{layout} int{self.bits} {group}"
        side = "" if self.symmetric else ", asymmetric"
        return f"{self.method} group {self.group_size}{side}"


_EXTERNAL_NOTE = (
    "this checkpoint keeps its quantization in a separate hf_quant_config.json "
    "(NVIDIA ModelOpt export); config.json alone does not give its weight bytes"
)


def external_quantization(model: Any) -> str:
    """The note of a model imported from a checkpoint that keeps its quantization outside
    ``config.json`` (its weights are then sized by a dtype, not as stored), else ""."""
    return next((d for d in getattr(model, "derived", ()) if _EXTERNAL_NOTE in d), "")


#: the words in a checkpoint's name that mark its weights quantized (``...-FP8``,
#: ``...-NVFP4``, ``...-AWQ``, ``...-GPTQ-Int4``), each a whole word of the name
_QUANT_NAME = re.compile(r"(?<![a-z0-9])(nvfp4|mxfp4|fp8|fp4|awq|gptq|int4)(?![a-z0-9])", re.I)


def quant_config_name(path: Path) -> Path | None:
    """Where the loader looks for the ModelOpt ``hf_quant_config.json`` published beside a
    config file: ``config.json`` -> ``hf_quant_config.json``, ``X.config.json`` ->
    ``X.hf_quant_config.json``; None for a file named otherwise (nothing is read beside it)."""
    name = path.name
    if name == "config.json":
        return path.with_name("hf_quant_config.json")
    if name.endswith(".config.json"):
        return path.with_name(name[: -len(".config.json")] + ".hf_quant_config.json")
    return None


def unread_quantization_warning(model: Any, weight_dtype: str | None = None) -> str:
    """One line where a config file's name (or its parent folder's, for a ``config.json``)
    or ``_name_or_path`` says its weights are quantized (FP8, FP4, NVFP4, MXFP4, AWQ, GPTQ,
    INT4) but no quantization config was read, so they are sized in a 16-bit dtype; it names
    the file the loader would read beside it (:func:`quant_config_name`), or how to name the
    config so one is read. ``""`` elsewhere (a shipped model, a quantized dtype, or
    ``weight_dtype``: the user gave the weights' dtype, which sizes them)."""
    scheme = getattr(model, "quantization", None)
    origin = getattr(model, "origin", None)
    if (scheme is not None and scheme.method != "external") or not origin or weight_dtype:
        return ""
    if model.weights_dtype not in ("bf16", "fp16", "fp32"):
        return ""
    path = Path(str(origin))
    if path.suffix != ".json":  # a shipped or YAML model says its own dtype
        return ""
    cut = path.name.endswith("config.json")
    own = path.name[: -len("config.json")].rstrip(".") if cut else path.stem
    names = [model.name, own or path.parent.name]  # a bare config.json: its folder's name
    mark = next((m.group(1) for n in names if (m := _QUANT_NAME.search(n or ""))), None)
    if mark is None:
        return ""
    beside = quant_config_name(path)
    if beside is None:  # nothing is read beside a file named otherwise
        renamed = path.with_name(f"{path.stem}.config.json")
        where = (
            f"(none in the file; a quantization config is read beside a file named "
            f"config.json or X.config.json only): weights sized {model.weights_dtype}; rename "
            f"it {renamed} and put the checkpoint's hf_quant_config.json beside it as "
            f"{quant_config_name(renamed)} (a ModelOpt export)"
        )
    else:
        where = (
            f"(none in the file, no {beside.name} beside it): weights sized "
            f"{model.weights_dtype}; put the checkpoint's hf_quant_config.json beside it as "
            f"{beside} (a ModelOpt export)"
        )
    return (
        f"{path.name}: its name says {mark.upper()} but no quantization config was found "
        f"{where}, or copy the repository's config.json with its quantization_config, or give "
        "--weight-dtype"
    )


def quantization_scheme(data: Mapping[str, Any], origin: str = "config.json") -> QuantScheme | None:
    """The scheme a ``config.json`` declares, ``None`` for an unquantized checkpoint.

    A config without ``quantization_config`` whose name or architecture marks a
    ModelOpt export (``NVFP4``/``FP4``/``FP8`` in ``_name_or_path``) gives the
    ``"external"`` scheme with a note.
    """
    q = data.get("quantization_config")
    if q is None and isinstance(data.get("text_config"), Mapping):
        q = data["text_config"].get("quantization_config")
    if isinstance(q, Mapping) and "expert_dtype" in data and "expert_dtype" not in q:
        # DeepseekV4Config moves a top-level expert_dtype into the quantization config
        q = {**q, "expert_dtype": data["expert_dtype"]}
    if q is None:
        name = str(data.get("_name_or_path", "")) + " " + origin
        if re.search(r"nvfp4|modelopt", name, re.IGNORECASE):
            return QuantScheme(method="external", note=_EXTERNAL_NOTE)
        return None
    return scheme_of(q, origin)


def _names(value: Any, origin: str, field: str) -> tuple[str, ...]:
    """A list of module names (``null`` for none)."""
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigError(
            f"must be a list of module names, got {type(value).__name__}",
            source=origin,
            field=f"quantization_config.{field}",
        )
    if not all(isinstance(v, str) for v in value) or len(value) > 2048:
        raise ConfigError(
            "must be a list of at most 2,048 module names",
            source=origin,
            field=f"quantization_config.{field}",
        )
    return tuple(value)


def scheme_of(q: Any, origin: str = "config.json") -> QuantScheme:
    """The scheme of one ``quantization_config`` mapping (as config.json writes it).

    Raises :class:`~mlacalc.words.errors.ConfigError` naming the key for a scheme the product
    does not model (``quant_method`` other than fp8, mxfp4 or compressed-tensors integer
    groups) or a malformed value.
    """
    if not isinstance(q, Mapping):
        raise ConfigError("must be an object", source=origin, field="quantization_config")
    method = q.get("quant_method")
    if method == "fp8":
        block = q.get("weight_block_size")
        if not (
            isinstance(block, Sequence)
            and not isinstance(block, str)
            and len(block) == 2
            and all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)
        ):
            raise ConfigError(
                "fp8 checkpoints are modelled with block scales; weight_block_size must be "
                f"two positive integers, got {block!r}",
                source=origin,
                field="quantization_config.weight_block_size",
            )
        keep = _names(q.get("modules_to_not_convert"), origin, "modules_to_not_convert")
        experts = q.get("expert_dtype", "fp8")
        if experts not in ("fp8", "fp4"):
            raise ConfigError(
                f"must be 'fp8' or 'fp4' (the routed experts' format), got {experts!r}",
                source=origin,
                field="quantization_config.expert_dtype",
            )
        return QuantScheme(
            method="fp8",
            block=(block[0], block[1]),
            bits=8,
            keep=keep,
            expert_format="mxfp4" if experts == "fp4" else None,
        )
    if method in ("awq", "gptq"):
        return _int_group_scheme(q, method, origin)
    if method == "mxfp4":
        keep = _names(q.get("modules_to_not_convert"), origin, "modules_to_not_convert")
        return QuantScheme(method="mxfp4", group_size=32, bits=4, experts_only=True, keep=keep)
    if method == "modelopt":
        return _modelopt_scheme(q, origin)
    if method == "compressed-tensors" and _float_group(q) is not None:
        return _float_scheme(q, origin)
    if method == "compressed-tensors":
        groups = q.get("config_groups") or {}
        if not isinstance(groups, Mapping) or len(groups) != 1:
            raise ConfigError(
                f"{len(groups) if isinstance(groups, Mapping) else 'no'} config_groups; "
                "one group is modelled",
                source=origin,
                field="quantization_config.config_groups",
            )
        group = next(iter(groups.values()))
        w = group.get("weights") if isinstance(group, Mapping) else None
        targets = group.get("targets") if isinstance(group, Mapping) else None
        if (
            not isinstance(w, Mapping)
            or not isinstance(targets, Sequence)
            or list(targets) != ["Linear"]
            or w.get("type") != "int"
            or w.get("strategy") != "group"
            or w.get("num_bits") not in (2, 4, 8)
            or not isinstance(w.get("group_size"), int)
            or isinstance(w.get("group_size"), bool)
            or w["group_size"] <= 0
        ):
            raise ConfigError(
                "only integer group quantization (2, 4 or 8 bits, a positive group_size) of "
                "Linear layers is modelled",
                source=origin,
                field="quantization_config.config_groups",
                fix="the nearest modelled scheme is int4 with group scales",
            )
        if q.get("format") != "pack-quantized":
            raise ConfigError(
                f"format {q.get('format')!r} is not modelled",
                source=origin,
                field="quantization_config.format",
                fix="use pack-quantized",
            )
        ignore = _names(q.get("ignore"), origin, "ignore")
        for pattern in ignore:
            if pattern.startswith("re:"):
                try:
                    re.compile(pattern[3:])
                except re.error as exc:
                    raise ConfigError(
                        f"{pattern[:60]!r} is not a regular expression ({exc})",
                        source=origin,
                        field="quantization_config.ignore",
                    ) from None
        return QuantScheme(
            method=f"int{w['num_bits']}",
            group_size=w["group_size"],
            bits=w["num_bits"],
            symmetric=bool(w.get("symmetric", True)),
            keep=tuple(i for i in ignore if not i.startswith("re:")),
            keep_regex=tuple(i[3:] for i in ignore if i.startswith("re:")),
        )
    raise ConfigError(
        f"quant_method {str(method)[:60]!r} is not modelled",
        source=origin,
        field="quantization_config.quant_method",
        fix="modelled: fp8 (block scales), mxfp4, modelopt (NVFP4, FP8, MIXED_PRECISION), "
        "compressed-tensors int or nvfp4 groups, awq, gptq; remove "
        "quantization_config to size the weights by weights_dtype",
    )


# -----------------------------------------------------------------------------------
# AWQ (AutoAWQ) and GPTQ (AutoGPTQ / GPTQModel) integer groups, fp16 scales

#: the AWQ kernels' checkpoint layouts mlacalc sizes (AutoAWQ's ``version``)
AWQ_VERSIONS = ("gemm", "gemv")
#: GPTQ's bit widths whose values pack whole into int32 words (3 bits straddle words)
GPTQ_BITS = (2, 4, 8)


def _int_field(q: Mapping[str, Any], key: str, origin: str, allowed: Sequence[int]) -> int:
    value = q.get(key)
    if isinstance(value, bool) or value not in allowed:
        raise ConfigError(
            f"{value!r} is not modelled for quant_method {q.get('quant_method')!r} "
            f"(modelled: {', '.join(map(str, allowed))})",
            source=origin,
            field=f"quantization_config.{key}",
        )
    return int(value)


def _int_group_scheme(q: Mapping[str, Any], method: str, origin: str) -> QuantScheme:
    """An AWQ or GPTQ checkpoint (:func:`mlacalc.cost.quant._quantized` sizes its tensors).

    AWQ: ``bits`` 4 (AutoAWQ packs 4-bit values only), ``group_size`` > 0, ``zero_point``
    true (its kernels are asymmetric), ``version`` gemm or gemv, ``modules_to_not_convert``
    kept fp16. GPTQ: ``bits`` 2, 4 or 8, ``group_size`` > 0 or -1 (one group a row: per
    output channel), ``desc_act`` / ``sym`` / ``true_sequential`` change values, not the
    tensors stored; ``checkpoint_format`` gptq (v1) or gptq_v2, same shapes. A group size
    that does not divide a matrix's input features is refused when that matrix is sized."""
    if method == "awq":
        bits = _int_field(q, "bits", origin, (4,))
        version = str(q.get("version", "gemm")).lower()
        if version not in AWQ_VERSIONS:
            raise ConfigError(
                f"version {str(q.get('version'))[:40]!r} is not modelled (modelled: gemm, gemv)",
                source=origin,
                field="quantization_config.version",
            )
        if q.get("zero_point", True) is not True:
            raise ConfigError(
                f"zero_point {q.get('zero_point')!r} is not modelled (AWQ's gemm and gemv "
                "kernels read a zero point a group: true)",
                source=origin,
                field="quantization_config.zero_point",
            )
        keep = _names(q.get("modules_to_not_convert"), origin, "modules_to_not_convert")
        group = q.get("group_size")
        if isinstance(group, bool) or not isinstance(group, int) or group <= 0:
            raise ConfigError(
                f"must be a positive integer, got {group!r}",
                source=origin,
                field="quantization_config.group_size",
            )
        if version == "gemv" and group not in (32, 64, 128):
            raise ConfigError(
                f"{group!r} is not modelled for AWQ gemv (its layout pads for 32, 64, 128)",
                source=origin,
                field="quantization_config.group_size",
            )
        return QuantScheme(
            method="awq",
            group_size=group,
            bits=bits,
            symmetric=False,
            keep=keep,
            layout=version,
        )
    bits = _int_field(q, "bits", origin, GPTQ_BITS)
    group = q.get("group_size")
    if isinstance(group, bool) or not isinstance(group, int) or not (group > 0 or group == -1):
        raise ConfigError(
            f"must be a positive integer or -1 (per channel), got {group!r}",
            source=origin,
            field="quantization_config.group_size",
        )
    fmt = str(q.get("checkpoint_format", "gptq")).lower()
    if fmt not in ("gptq", "gptq_v2"):
        raise ConfigError(
            f"checkpoint_format {fmt[:40]!r} is not modelled (gptq, gptq_v2)",
            source=origin,
            field="quantization_config.checkpoint_format",
        )
    keep = _names(q.get("modules_to_not_convert"), origin, "modules_to_not_convert")
    return QuantScheme(
        method="gptq",
        group_size=group,
        bits=bits,
        symmetric=bool(q.get("sym", True)),
        keep=keep,
        layout="gptq desc_act" if q.get("desc_act") else "gptq",
    )


# -----------------------------------------------------------------------------------
# NVIDIA ModelOpt (hf_quant_config.json, or quant_method "modelopt" in config.json)

#: ModelOpt quant_algo -> (storage format, activations quantized)
_MODELOPT_ALGOS = {
    "NVFP4": ("nvfp4", True),
    "W4A16_NVFP4": ("w4a16_nvfp4", False),
    "FP8": ("fp8_tensor", True),
}

#: prefixes the multimodal and hybrid exports put before the language model's own names
_PREFIXES = (
    ("model.language_model.", "model."),
    ("language_model.model.", "model."),
    ("language_model.lm_head", "lm_head"),
    ("language_model.", ""),
    ("backbone.embeddings", "model.embed_tokens"),
    ("backbone.", "model."),
)


_EXPERT_INDEX = re.compile(r"\.experts\.\d+\.")

#: A one-mixer-per-layer export's ``mixer.`` (Nemotron-H) by the module under it: the names
#: :mod:`mlacalc.models.tensors` gives that block (``mamba.``, ``self_attn.``, ``mlp.``).
_MIXER = {
    **dict.fromkeys(("in_proj", "out_proj", "conv1d", "norm", "A_log", "D", "dt_bias"), "mamba"),
    **dict.fromkeys(("q_proj", "k_proj", "v_proj", "o_proj"), "self_attn"),
    **dict.fromkeys(("experts", "shared_experts", "gate", "up_proj", "down_proj"), "mlp"),
    **dict.fromkeys(("fc1_latent_proj", "fc2_latent_proj"), "mlp"),
}
_MIXER_RE = re.compile(r"\.mixer\.(\w+)")


def _mixer(m: re.Match) -> str:
    return f".{_MIXER.get(m.group(1), 'mixer')}.{m.group(1)}"


def language_model_name(name: str) -> str:
    """A module name of an export as the language model's own (``model.layers.3...``), each
    expert's index folded (``experts.*``), a block's ``mixer.`` named by its kind: the names
    :mod:`mlacalc.models.tensors` uses."""
    for old, new in _PREFIXES:
        if name.startswith(old):
            name = new + name[len(old) :]
            break
    if ".mixer." in name:
        name = _MIXER_RE.sub(_mixer, name)
    return _EXPERT_INDEX.sub(".experts.", name) if ".experts." in name else name


_PREFIX_RE = re.compile("^(" + "|".join(re.escape(old) for old, _ in _PREFIXES) + ")", re.MULTILINE)


def _language_model_names(names: list[str]) -> list[str]:
    """:func:`language_model_name` of many names at once (one pass over their text: a
    mixed-precision export lists thousands)."""
    if not names:
        return []
    table = dict(_PREFIXES)
    text = _PREFIX_RE.sub(lambda m: table[m.group(1)], "\n".join(names))
    text = _MIXER_RE.sub(_mixer, text) if ".mixer." in text else text
    return _EXPERT_INDEX.sub(".experts.", text).split("\n")


def modelopt_config(hf_quant: Any, origin: str = "hf_quant_config.json") -> dict[str, Any]:
    """The ``quantization_config`` a ModelOpt ``hf_quant_config.json`` means: its
    ``quantization`` block with ``quant_method: modelopt``, every module name read as the
    language model's own and per-expert entries folded into one (so the record stays small).
    Refused naming the key when the file is not a ModelOpt export."""
    block = hf_quant.get("quantization") if isinstance(hf_quant, Mapping) else None
    if not isinstance(block, Mapping):
        raise ConfigError(
            "has no 'quantization' object (not a ModelOpt hf_quant_config.json)",
            source=origin,
            field="quantization",
        )
    out: dict[str, Any] = {"quant_method": "modelopt"}
    for key in ("quant_algo", "group_size", "kv_cache_quant_algo"):
        if block.get(key) is not None:
            out[key] = block[key]
    try:
        exclude = _names(block.get("exclude_modules"), origin, "exclude_modules")
    except ConfigError as e:  # this file's key
        raise ConfigError(e.message, source=origin, field="quantization.exclude_modules") from None
    out["exclude_modules"] = list(dict.fromkeys(language_model_name(e) for e in exclude))
    layers = block.get("quantized_layers")
    if layers is not None:
        if not isinstance(layers, Mapping) or len(layers) > 200_000:
            raise ConfigError(
                "must map module names to their quant_algo",
                source=origin,
                field="quantization.quantized_layers",
            )
        grouped: dict[str, dict[str, None]] = {}
        modules = [str(m).replace("\n", " ") for m in layers]
        for module, name, spec in zip(modules, _language_model_names(modules), layers.values()):
            algo = spec.get("quant_algo") if isinstance(spec, Mapping) else None
            if not isinstance(algo, str):
                raise ConfigError(
                    f"{module[:60]!r} names no quant_algo",
                    source=origin,
                    field="quantization.quantized_layers",
                )
            grouped.setdefault(algo, {})[name] = None
        out["quantized_layers"] = {k: list(v) for k, v in grouped.items()}
    try:  # checked here, so that an error names this file and its own keys
        _modelopt_scheme(out, origin)
    except ConfigError as e:
        field = (e.field or "").replace("quantization_config.", "quantization.", 1)
        raise ConfigError(e.message, source=origin, field=field or None, fix=e.fix) from None
    return out


def _modelopt_scheme(q: Mapping[str, Any], origin: str) -> QuantScheme:
    """The scheme of a ``quant_method: modelopt`` mapping (from hf_quant_config.json through
    :func:`modelopt_config`, or as config.json writes it with ``config_groups``/``ignore``)."""
    algo = q.get("quant_algo")
    field = "quantization_config.quant_algo"
    kv = _kv_dtype(q, origin)
    keep = tuple(
        language_model_name(k)
        for k in _names(q.get("exclude_modules", q.get("ignore")), origin, "exclude_modules")
    )
    group = q.get("group_size")
    if group is None:
        weights = _float_group(q)
        group = weights.get("group_size") if weights else None
    if algo == "MIXED_PRECISION":
        _check_nvfp4_group(group, origin)  # its 4-bit layers are NVFP4's
        layers = q.get("quantized_layers")
        if not isinstance(layers, Mapping) or not layers:
            raise ConfigError(
                "MIXED_PRECISION names no quantized_layers",
                source=origin,
                field="quantization_config.quantized_layers",
            )
        per_module: list[tuple[str, str]] = []
        for name, modules in layers.items():
            if name not in _MODELOPT_ALGOS:
                raise ConfigError(
                    f"quant_algo {str(name)[:40]!r} of a layer is not modelled",
                    source=origin,
                    field="quantization_config.quantized_layers",
                    fix="modelled: " + ", ".join(_MODELOPT_ALGOS),
                )
            fmt = _MODELOPT_ALGOS[name][0]
            per_module += [(str(m), fmt) for m in _names(modules, origin, "quantized_layers")]
        return QuantScheme(
            method="mixed",
            bits=4,
            group_size=16,
            keep=keep,
            glob=True,
            per_module=tuple(per_module),
            kv_cache=kv,
        )
    if algo not in _MODELOPT_ALGOS:
        raise ConfigError(
            f"quant_algo {str(algo)[:40]!r} is not modelled",
            source=origin,
            field=field,
            fix="modelled: NVFP4, W4A16_NVFP4, FP8, MIXED_PRECISION",
        )
    fmt, acts = _MODELOPT_ALGOS[algo]
    if fmt == "fp8_tensor":
        return QuantScheme(method=fmt, bits=8, keep=keep, glob=True, input_scale=True, kv_cache=kv)
    _check_nvfp4_group(group, origin)
    return QuantScheme(
        method="nvfp4", bits=4, group_size=16, keep=keep, glob=True, input_scale=acts, kv_cache=kv
    )


def _check_nvfp4_group(group: Any, origin: str) -> None:
    """NVFP4 scales 16 values: any other ``group_size`` (0, -16, 32) is refused."""
    if group not in (16, None):
        raise ConfigError(
            f"NVFP4 with group_size {group!r} is not modelled (NVFP4 scales 16 values)",
            source=origin,
            field="quantization_config.group_size",
            fix="group_size: 16",
        )


#: ModelOpt's KV-cache algorithms mlacalc reads, by the KV dtype each calibrates (NVFP4 from
#: recall); the cache is sized in the KV dtype asked, a note naming the checkpoint's. INT8
#: (from recall ModelOpt's too) is not modelled and refused as such
_KV_ALGOS = {"FP8": "fp8", "NVFP4": "nvfp4"}


def _kv_dtype(q: Mapping[str, Any], origin: str = "quantization_config") -> str | None:
    """The KV-cache dtype a config calibrates (``kv_cache_quant_algo: FP8`` or ``NVFP4``, or a
    float ``kv_cache_scheme`` of 8 bits), else None; an algorithm not modelled (INT8, INT2, a
    number) is refused, not read as no KV quantization."""
    algo = q.get("kv_cache_quant_algo")
    if algo is not None and not (isinstance(algo, str) and algo.upper() in _KV_ALGOS):
        raise ConfigError(
            f"kv_cache_quant_algo {str(algo)[:40]!r} is not modelled (FP8, NVFP4 or null)",
            source=origin,
            field="quantization_config.kv_cache_quant_algo",
            fix="give FP8 or NVFP4 for a cache in that format, or null for none",
        )
    if isinstance(algo, str):
        return _KV_ALGOS[algo.upper()]
    scheme = q.get("kv_cache_scheme")
    if (
        isinstance(scheme, Mapping)
        and scheme.get("type") == "float"
        and scheme.get("num_bits") == 8
    ):
        return "fp8"
    return None


def _float_group(q: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The weights entry of a single config group of 4- or 8-bit floats, else None."""
    groups = q.get("config_groups")
    if not isinstance(groups, Mapping) or len(groups) != 1:
        return None
    group = next(iter(groups.values()))
    weights = group.get("weights") if isinstance(group, Mapping) else None
    if isinstance(weights, Mapping) and weights.get("type") == "float":
        return weights
    return None


def _float_scheme(q: Mapping[str, Any], origin: str) -> QuantScheme:
    """compressed-tensors float groups: NVFP4 (4 bits, group 16) or fp8 per tensor."""
    weights = _float_group(q) or {}
    groups = q.get("config_groups") or {}
    group = next(iter(groups.values()))
    acts = group.get("input_activations") if isinstance(group, Mapping) else None
    ignore = _names(q.get("ignore"), origin, "ignore")
    keep = tuple(language_model_name(i) for i in ignore if not i.startswith("re:"))
    regex = tuple(i[3:] for i in ignore if i.startswith("re:"))
    kv = _kv_dtype(q)
    if weights.get("num_bits") == 4 and weights.get("group_size") == 16:
        return QuantScheme(
            method="nvfp4",
            bits=4,
            group_size=16,
            keep=keep,
            keep_regex=regex,
            input_scale=isinstance(acts, Mapping),
            kv_cache=kv,
        )
    if weights.get("num_bits") == 8 and weights.get("strategy", "tensor") == "tensor":
        return QuantScheme(
            method="fp8_tensor", bits=8, keep=keep, keep_regex=regex, input_scale=True, kv_cache=kv
        )
    raise ConfigError(
        "only NVFP4 (4-bit floats in groups of 16) and per-tensor fp8 float groups are modelled",
        source=origin,
        field="quantization_config.config_groups",
    )
