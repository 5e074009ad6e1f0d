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

A checkpoint that keeps its scheme outside ``config.json`` (NVIDIA's ModelOpt exports write
``hf_quant_config.json``) is recorded as the ``external`` scheme with a note saying that its
weights are then sized by a dtype (:func:`external_quantization`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mlacalc.words.errors import ConfigError

__all__ = ["QuantScheme", "external_quantization", "quantization_scheme", "scheme_of"]


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

    def describe(self) -> str:
        """The scheme in a few words, as reports name it (``fp8 block 128x128``)."""
        if self.method == "fp8":
            return f"fp8 block {self.block[0]}x{self.block[1]}"
        if self.method == "mxfp4":
            return "mxfp4 experts"
        if self.method == "external":
            return "external (hf_quant_config.json)"
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
    if not all(isinstance(v, str) for v in value) or len(value) > 256:
        raise ConfigError(
            "must be a list of at most 256 module names",
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
        return QuantScheme(method="fp8", block=(block[0], block[1]), bits=8, keep=keep)
    if method == "mxfp4":
        keep = _names(q.get("modules_to_not_convert"), origin, "modules_to_not_convert")
        return QuantScheme(method="mxfp4", group_size=32, bits=4, experts_only=True, keep=keep)
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
        fix="modelled: fp8 (block scales), mxfp4, compressed-tensors int groups; remove "
        "quantization_config to size the weights by weights_dtype",
    )
