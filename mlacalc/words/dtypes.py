"""Data types and KV-cache storage layouts.

Sizes are kept in *bits* so that 4-bit and 6-bit formats stay exact; bytes are
derived at the edge. A :class:`KVLayout` describes how one cached row (one token
of one layer) is stored: the bits of its main part, the bits of a separate RoPE
part (MLA's decoupled key), and optional per-group scale factors.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mlacalc.words.errors import InvalidArgumentError, UnknownDtypeError

__all__ = [
    "DTYPE_BITS",
    "KV_LAYOUTS",
    "STATE_DTYPES",
    "WEIGHT_ELEMENT_BYTES",
    "WEIGHT_SCALE_BYTES",
    "KVLayout",
    "check_kv_layout",
    "check_state_dtype",
    "dtype_bits",
    "gemm_class",
    "resolve_kv_layout",
    "state_dtype_name",
    "state_layout",
    "weight_gemm_class",
    "weight_only_class",
    "with_state_dtype",
]

#: the dtypes a linear or Mamba layer's recurrent state may be kept in (``--state-dtype``)
STATE_DTYPES = {"fp32": 32, "bf16": 16}

#: Bits per element of the dtypes mlacalc knows (canonical names first).
DTYPE_BITS: dict[str, int] = {
    "fp32": 32,
    "bf16": 16,
    "fp16": 16,
    "fp8": 8,
    "fp8_e4m3": 8,
    "fp8_e5m2": 8,
    "int8": 8,
    "int4": 4,
    "fp4": 4,
}

_ALIASES = {
    "float32": "fp32",
    "float": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float8": "fp8",
    "float8_e4m3fn": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2",
    "e4m3": "fp8_e4m3",
    "e5m2": "fp8_e5m2",
}


#: Bytes per weight element of the quantized kernel dtypes the measured tables name (a value,
#: without its scales): 8-bit one byte, 4-bit two to a byte; any other kernel dtype is 2 (bf16)
WEIGHT_ELEMENT_BYTES: dict[str, float] = {
    "fp8": 1.0,
    "fp8_block": 1.0,
    "int8": 1.0,
    "nvfp4": 0.5,
    "w4a16_mxfp4": 0.5,
    "w4a8_mxfp4": 0.5,
    "w4a16": 0.5,
}

#: Block-scale bytes per weight element of the 4-bit kernel dtypes: nvfp4 an fp8 (E4M3) scale
#: per 16 elements, MXFP4 an 8-bit power-of-two (E8M0) one per 32, int4 weight-only an fp16 one
#: per group of 128. The one table the measured rows' bytes and the MoE time model's expert
#: weights both read (fp8_block's float32 scale per 128 x 128 tile is counted by its shape).
WEIGHT_SCALE_BYTES: dict[str, float] = {
    "nvfp4": 1.0 / 16,
    "w4a16_mxfp4": 1.0 / 32,
    "w4a8_mxfp4": 1.0 / 32,
    "w4a16": 2.0 / 128,
}


def canonical_dtype(name: str) -> str:
    """Return the canonical name of a dtype (``"bfloat16"`` -> ``"bf16"``)."""
    if not isinstance(name, str):
        raise UnknownDtypeError(name, list(DTYPE_BITS))
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in DTYPE_BITS:
        raise UnknownDtypeError(name, list(DTYPE_BITS))
    return key


def dtype_bits(name: str) -> int:
    """Bits per element of a dtype.

    Examples
    --------
    >>> dtype_bits("bf16"), dtype_bits("fp8"), dtype_bits("int4")
    (16, 8, 4)
    """
    return DTYPE_BITS[canonical_dtype(name)]


@dataclass(frozen=True)
class KVLayout:
    """How one cached row (one token, one layer) is stored.

    Parameters
    ----------
    name
        Label used in reports.
    bits
        Bits per element of the main part (K and V, or MLA's latent ``c_kv``).
    rope_bits
        Bits per element of MLA's decoupled RoPE key; ``None`` means ``bits``.
        Ignored for MHA/GQA/MQA, whose RoPE is applied inside K.
    scale_group
        Elements of the main part that share one scale factor; 0 for none.
    scale_bytes
        Bytes of each scale factor.
    state_bits
        Bits per element of a linear-attention or Mamba layer's recurrent state (32: float32,
        as the Hugging Face reference holds it; an engine may keep it in bf16:
        :func:`with_state_dtype`). The state's convolution window is in ``bits``.

    The bytes of one row are ``ceil(main * bits / 8) + ceil(main / scale_group) *
    scale_bytes + ceil(rope * rope_bits / 8)``: each part is packed to whole bytes.
    """

    name: str
    bits: int
    rope_bits: int | None = None
    scale_group: int = 0
    scale_bytes: int = 0
    state_bits: int = 32

    def __post_init__(self):
        for field_name in ("bits", "scale_group", "scale_bytes", "state_bits"):
            value = getattr(self, field_name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidArgumentError(
                    field_name, f"must be a non-negative integer, got {value!r}"
                )
        if self.bits == 0:
            raise InvalidArgumentError("bits", "must be positive")
        if self.state_bits not in STATE_DTYPES.values():
            raise InvalidArgumentError(
                "state_bits", f"must be 32 (fp32) or 16 (bf16), got {self.state_bits!r}"
            )
        if self.rope_bits is not None and (
            not isinstance(self.rope_bits, int) or self.rope_bits <= 0
        ):
            raise InvalidArgumentError(
                "rope_bits", f"must be a positive integer, got {self.rope_bits!r}"
            )
        if (self.scale_group == 0) != (self.scale_bytes == 0):
            raise InvalidArgumentError(
                "scale_group", "scale_group and scale_bytes must be both zero or both positive"
            )

    @classmethod
    def uniform(cls, dtype: str | int) -> KVLayout:
        """A layout storing every element in one dtype (a name, or a bit width)."""
        if isinstance(dtype, int) and not isinstance(dtype, bool):
            return cls(name=f"{dtype}bit", bits=dtype)
        name = canonical_dtype(dtype)
        return cls(name=name, bits=DTYPE_BITS[name])

    @property
    def state_bytes(self) -> int:
        """Bytes of one element of a linear or Mamba layer's recurrent state."""
        return self.state_bits // 8

    def row_bytes(self, main_elements: int, rope_elements: int = 0) -> int:
        """Exact bytes of one cached row with ``main_elements`` + ``rope_elements`` (numbers, or
        numpy arrays of them: :func:`mlacalc.cost.sweep.sweep` passes arrays; each ceiling is a
        floor division, which holds for both)."""
        rope_bits = self.bits if self.rope_bits is None else self.rope_bits
        total = -(-main_elements * self.bits // 8)
        if self.scale_group:
            total += -(-main_elements // self.scale_group) * self.scale_bytes
            if self.rope_bits is None:  # a RoPE key in the block-scaled dtype takes scales too
                total += -(-rope_elements // self.scale_group) * self.scale_bytes
        total += -(-rope_elements * rope_bits // 8)
        return total


#: Named cache layouts beyond the plain dtypes.
KV_LAYOUTS: dict[str, KVLayout] = {
    # FlashMLA "FP8 with scale": 512 float8_e4m3 latent values quantised in 1x128 tiles
    # with one float32 scale each (4 x 4 B), plus the 64-dim RoPE key kept in bfloat16.
    # 512 + 16 + 128 = 656 bytes per token per layer for DeepSeek-V3.
    # Source: deepseek-ai/FlashMLA README ("FP8 KV Cache"); vLLM's "fp8_ds_mla".
    "fp8_ds_mla": KVLayout(name="fp8_ds_mla", bits=8, rope_bits=16, scale_group=128, scale_bytes=4),
    # NVFP4: e2m1 values two to a byte with one e4m3 scale per 16 (K and V, or MLA's latent
    # and its RoPE key, each in blocks of its own), as NVFP4 weights are stored (4.5 bits a
    # value); a bare "fp4" cache is four bits with no scales
    "nvfp4": KVLayout(name="nvfp4", bits=4, scale_group=16, scale_bytes=1),
}


def resolve_kv_layout(kv_dtype: str | int | KVLayout) -> KVLayout:
    """Turn a dtype name, bit width, layout name or :class:`KVLayout` into a layout."""
    if isinstance(kv_dtype, KVLayout):
        return kv_dtype
    if isinstance(kv_dtype, str):
        hit = _RESOLVED.get(kv_dtype)
        if hit is not None:  # a name resolved before (the layouts are frozen): speed only
            return hit
    if isinstance(kv_dtype, str) and kv_dtype.strip().lower() in KV_LAYOUTS:
        return KV_LAYOUTS[kv_dtype.strip().lower()]
    if isinstance(kv_dtype, int) and not isinstance(kv_dtype, bool):
        if kv_dtype <= 0:
            raise InvalidArgumentError("kv_dtype", f"a bit width must be positive, got {kv_dtype}")
        return KVLayout.uniform(kv_dtype)
    try:
        layout = KVLayout.uniform(kv_dtype)
    except UnknownDtypeError:
        raise UnknownDtypeError(
            kv_dtype, list(DTYPE_BITS) + list(KV_LAYOUTS), what="KV dtype or layout"
        ) from None
    if isinstance(kv_dtype, str) and len(_RESOLVED) < 256:
        _RESOLVED[kv_dtype] = layout
    return layout


#: the plain dtype names :func:`resolve_kv_layout` has resolved (a model step resolves its
#: cache's name once a kernel list: the module tables' mapping builds 17,248 lists)
_RESOLVED: dict[str, KVLayout] = {}


def state_layout(kv_dtype: str | int | KVLayout) -> KVLayout:
    """The layout a layer that keeps no latent row (a linear-attention or Mamba layer's
    convolution window) stores its cache in under ``kv_dtype``: an MLA-only layout (a RoPE
    part of its own: ``fp8_ds_mla``, FlashMLA's latent row) applies to the MLA layers only,
    the others keep its values' plain dtype (fp8), as ``--kv-dtype fp8`` sizes them; its
    float32 scale per 128 values had made Kimi-Linear's cache larger than in bf16. vLLM takes
    ``fp8_ds_mla`` for the sparse-MLA attention backend only (from recall), so no engine
    stores another layer's state in it."""
    layout = resolve_kv_layout(kv_dtype)
    if layout.rope_bits is None:
        return layout
    return KVLayout(
        name=f"{layout.name} (plain {layout.bits}-bit outside MLA)",
        bits=layout.bits,
        state_bits=layout.state_bits,
    )


def state_dtype_name(layout: KVLayout) -> str:
    """The recurrent state's dtype under ``layout``: ``fp32`` or ``bf16``."""
    return next(name for name, bits in STATE_DTYPES.items() if bits == layout.state_bits)


def check_state_dtype(state_dtype: str) -> str:
    """``state_dtype`` as :data:`STATE_DTYPES` names it (``"BF16 "`` -> ``"bf16"``), or one
    line naming the argument and the dtypes it takes."""
    key = str(state_dtype).strip().lower()
    if key not in STATE_DTYPES:
        raise InvalidArgumentError(
            "state_dtype", f"use one of {', '.join(STATE_DTYPES)}, got {state_dtype!r}"
        )
    return key


def with_state_dtype(kv_dtype: str | int | KVLayout, state_dtype: str | None) -> KVLayout:
    """``kv_dtype``'s layout with its linear and Mamba layers' recurrent state kept in
    ``state_dtype`` (``fp32``, the default, or ``bf16``); ``None`` keeps the
    layout's. Its name stays the KV dtype's (checks read it): outputs name the state's dtype
    apart (:func:`state_dtype_name`)."""
    layout = resolve_kv_layout(kv_dtype)
    if state_dtype is None:
        return layout
    bits = STATE_DTYPES[check_state_dtype(state_dtype)]
    if bits == layout.state_bits:
        return layout
    return replace(layout, state_bits=bits)


def check_kv_layout(
    layout: KVLayout, latent_cache: bool, model_name: str = "this model", argument: str = "kv_dtype"
) -> KVLayout:
    """Refuse a layout that does not apply to the cache a model keeps.

    A layout with a separate RoPE part (``rope_bits``, as FlashMLA's ``fp8_ds_mla``)
    describes MLA's latent row (the compressed ``c_kv`` plus the decoupled RoPE key);
    a cache of per-head keys and values (MHA, GQA, MQA) has no such part, so its size
    under that layout would be made up. ``latent_cache`` says whether the model keeps
    the MLA latent row (an MLA model run naive keeps the same fp8 values and scales,
    expanded per head).
    """
    if layout.rope_bits is not None and not latent_cache:
        plain = ", ".join(DTYPE_BITS)
        raise InvalidArgumentError(
            argument,
            f"layout '{layout.name}' is for an MLA latent cache (c_kv plus RoPE key); "
            f"{model_name} caches per-head keys and values: use a plain dtype ({plain}) "
            "or a bit width",
        )
    return layout


# kernel dtype classes: the class a GEMM runs as


def gemm_class(act_dtype: str, weight_dtype: str, has_weight: bool) -> str:
    """The class a GEMM runs as: a product by weights the class of their dtype
    (:func:`weight_gemm_class`); every other product the activation dtype."""
    return weight_gemm_class(weight_dtype, act_dtype) if has_weight else act_dtype


def weight_gemm_class(weight_dtype: str, act_dtype: str = "bf16") -> str:
    """The GEMM (and MoE) class of a product by weights of ``weight_dtype`` under
    ``act_dtype`` activations: the one rule the model step
    (:func:`mlacalc.cost.model_step.step_kernels`) and the serving step
    (:class:`mlacalc.serving.gpu_step.StepModel`) share. fp8 weights run the fp8 GEMMs
    (DeepSeek-V3 style), fp4 weights the fp4 GEMMs; integer weights under 16-bit activations
    the weight-only GEMMs (:func:`weight_only_class`); any other weights the activation dtype.
    The class names the weights' format, not a device: on a device whose tensor cores lack
    that format (fp8 on A100, fp4 before Blackwell) the time model runs the dequantizing
    weight-only kernel instead (:func:`mlacalc.timemodel.kernel_time.device_batch`)."""
    if weight_dtype.startswith("fp8"):
        # fp8_e4m3 (and e5m2) weights run the same fp8 kernels: the classes are fitted as
        # ``fp8`` (a review: --weight-dtype fp8_e4m3 had missed vLLM's fp8 MoE class, its
        # routed experts 81.7 ms a step against fp8's 95.4)
        return "fp8"
    if weight_dtype == "fp4":
        return weight_dtype
    if act_dtype in ("bf16", "fp16") and weight_only_class(weight_dtype):
        return weight_only_class(weight_dtype)
    return act_dtype


def weight_only_class(weight_dtype: str) -> str:
    """The weight-only GEMM class of integer weights under 16-bit activations (``"w8a16"``,
    ``"w4a16"``), or ``""`` for any other weight dtype."""
    return f"w{weight_dtype[3:]}a16" if weight_dtype in ("int8", "int4") else ""
