"""Quantized checkpoints: exact weight bytes from a config's ``quantization_config``.

Parameter counts stay logical (unquantized, as Hugging Face counts them); this module
gives the bytes the checkpoint's tensors occupy, scales included, and names the
tensors that stay in the high-precision dtype. Schemes:

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

A checkpoint that keeps its scheme outside ``config.json`` (NVIDIA's ModelOpt exports
write ``hf_quant_config.json``) cannot be sized from ``config.json`` alone:
:func:`quantization_scheme` says so in its ``note`` and :func:`quantized_weight_bytes`
refuses it by name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

__all__ = [
    "QuantScheme",
    "QuantizedWeights",
    "Tensor",
    "quantization_scheme",
    "quantized_weight_bytes",
]


@dataclass(frozen=True)
class Tensor:
    """One weight tensor of a checkpoint.

    ``role`` is ``"linear"`` for a projection matrix ``[out, in]``, ``"experts"`` for
    ``E`` stacked expert matrices ``[E, out, in]``, and ``"other"`` for embeddings,
    norms, biases, router weights and anything else that is never quantized.
    """

    name: str
    shape: tuple[int, ...]
    role: str = "other"

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "scheme": self.scheme,
            "total_bytes": self.total_bytes,
            "quantized_params": self.quantized_params,
            "payload_bytes": self.payload_bytes,
            "scale_bytes": self.scale_bytes,
            "kept_params": self.kept_params,
            "kept_bytes": self.kept_bytes,
            "kept": list(self.kept),
            "note": self.note,
        }


_EXTERNAL_NOTE = (
    "this checkpoint keeps its quantization in a separate hf_quant_config.json "
    "(NVIDIA ModelOpt export); config.json alone does not give its weight bytes"
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
    if q is None:
        name = str(data.get("_name_or_path", "")) + " " + origin
        if re.search(r"nvfp4|modelopt", name, re.IGNORECASE):
            return QuantScheme(method="external", note=_EXTERNAL_NOTE)
        return None
    if not isinstance(q, Mapping):
        raise ConfigError("must be an object", source=origin, field="quantization_config")
    method = q.get("quant_method")
    keep = tuple(q.get("modules_to_not_convert") or ())
    if method == "fp8":
        block = q.get("weight_block_size")
        if not (
            isinstance(block, list)
            and len(block) == 2
            and all(isinstance(b, int) and b > 0 for b in block)
        ):
            raise ConfigError(
                "fp8 checkpoints are modelled with block scales; weight_block_size must be "
                f"two positive integers, got {block!r}",
                source=origin,
                field="quantization_config.weight_block_size",
            )
        return QuantScheme(method="fp8", block=(block[0], block[1]), bits=8, keep=keep)
    if method == "mxfp4":
        return QuantScheme(method="mxfp4", group_size=32, bits=4, experts_only=True, keep=keep)
    if method == "compressed-tensors":
        groups = q.get("config_groups") or {}
        if len(groups) != 1:
            raise ConfigError(
                f"{len(groups)} config_groups; one group is modelled",
                source=origin,
                field="quantization_config.config_groups",
            )
        group = next(iter(groups.values()))
        w = group.get("weights") or {}
        if (
            group.get("targets") != ["Linear"]
            or w.get("type") != "int"
            or w.get("strategy") != "group"
        ):
            raise ConfigError(
                "only integer group quantization of Linear layers is modelled",
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
        ignore = tuple(q.get("ignore") or ())
        return QuantScheme(
            method=f"int{w['num_bits']}",
            group_size=w["group_size"],
            bits=w["num_bits"],
            symmetric=bool(w.get("symmetric", True)),
            keep=tuple(i for i in ignore if not i.startswith("re:")),
            keep_regex=tuple(i[3:] for i in ignore if i.startswith("re:")),
        )
    raise ConfigError(
        f"quant_method {method!r} is not modelled",
        source=origin,
        field="quantization_config.quant_method",
        fix="modelled: fp8 (block scales), mxfp4, compressed-tensors int groups",
    )


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


def _kept(t: Tensor, s: QuantScheme) -> bool:
    if t.role not in ("linear", "experts") or _NEVER.search(t.name):
        return True
    if s.experts_only and t.role != "experts":
        return True
    module = t.name.rsplit(".", 1)[0]
    if any(_matches(k, module) for k in s.keep):
        return True
    return any(re.fullmatch(r, module) for r in s.keep_regex)


def _quantized(shape: tuple[int, ...], role: str, s: QuantScheme) -> tuple[int, int]:
    """(payload bytes, scale bytes) of one quantized tensor."""
    experts = shape[0] if role == "experts" else 1
    out, inp = shape[-2], shape[-1]
    if s.method == "fp8":
        bm, bn = s.block
        return experts * out * inp, experts * 4 * (-(-out // bm)) * (-(-inp // bn))
    if s.method == "mxfp4":
        return experts * out * inp // 2, experts * out * (-(-inp // 32))
    # packed integer groups: 32 // bits values per int32 word along the row
    per_word = 32 // s.bits
    words = -(-inp // per_word)
    groups = -(-inp // s.group_size)
    scales = experts * out * groups * 2 * (1 if s.symmetric else 2)
    return experts * out * words * 4, scales + experts * 8  # + int32 weight_shape pair


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
    q_params = payload = scales = kept_params = 0
    kept: list[str] = []
    for t in tensors:
        if _kept(t, scheme):
            kept_params += t.numel
            if t.role != "other":
                kept.append(t.name)
            continue
        p, s = _quantized(t.shape, t.role, scheme)
        q_params += t.numel
        payload += p
        scales += s
    kept_bytes = kept_params * kept_dtype_bytes
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
    )


def _collapse(names: list[str]) -> list[str]:
    """Projection names with layer indices folded (``model.layers.*.self_attn.q_proj.weight``)."""
    seen: dict[str, None] = {}
    for n in names:
        seen[re.sub(r"\.\d+\.", ".*.", n)] = None
    return list(seen)
