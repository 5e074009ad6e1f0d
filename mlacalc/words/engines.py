"""The serving engines whose kernels the time model predicts.

An *engine* is the inference framework that runs a model's kernels on a GPU: its attention
backends, GEMM libraries, fused MoE and all-reduce. The same layer costs a different time under
TensorRT-LLM, SGLang and vLLM, so every kernel time is an engine's time, and the engine is a
dimension of every prediction, fit and validation:

- ``trtllm``: NVIDIA TensorRT-LLM (the default: the first measured tables were its kernels);
- ``sglang``: SGLang (FlashInfer / its own attention backends, DeepGEMM, Triton fused MoE,
  its custom all-reduce);
- ``vllm``: vLLM (FlashInfer / FlashAttention / Triton attention, CUTLASS and DeepGEMM
  GEMMs, its fused-MoE back-ends, its custom all-reduce).

A measured table belongs to the engine of its collector's framework folder
(:data:`FRAMEWORK_ENGINES`); a table of a communication library every engine calls (NCCL,
DeepEP) belongs to none and is read with every engine's tables (:data:`SHARED`).
"""

from __future__ import annotations

from typing import Any

from mlacalc.words.arguments import show_value
from mlacalc.words.errors import InvalidArgumentError

__all__ = [
    "ALL_ENGINES",
    "DEFAULT_ENGINE",
    "ENGINES",
    "ENGINE_LABELS",
    "FRAMEWORK_ENGINES",
    "SHARED",
    "check_engine",
    "default_engine",
    "engine_of_framework",
]

#: The engines, in the order outputs list them.
ENGINES = ("trtllm", "sglang", "vllm")
#: Each engine's name as its project writes it, for sentences that name a version of it.
ENGINE_LABELS = {"trtllm": "TensorRT-LLM", "sglang": "SGLang", "vllm": "vLLM"}
#: The engine a prediction is for when none is named.
DEFAULT_ENGINE = "trtllm"
#: What the default engine is on another vendor's GPU, and why (said beside it)
OTHER_VENDOR_DEFAULT = ("sglang", "TensorRT-LLM runs on NVIDIA GPUs only")


def default_engine(hw: Any = None) -> str:
    """The engine a prediction on ``hw`` is for when none is named: :data:`DEFAULT_ENGINE`,
    except on another vendor's GPU (AMD's), where TensorRT-LLM does not run: SGLang, which
    AMD supports (from recall, :data:`OTHER_VENDOR_DEFAULT`). Its kernels are TensorRT-LLM's
    stand-ins there either way; only its scheduler defaults and its name differ."""
    vendor = str(getattr(hw, "vendor", "") or "").lower()
    if hw is not None and getattr(hw, "kind", "gpu") == "gpu" and vendor not in ("", "nvidia"):
        return OTHER_VENDOR_DEFAULT[0]
    return DEFAULT_ENGINE


def default_engine_words(hw: Any = None) -> str:
    """The default engine on ``hw`` in words: "the default engine", or on another vendor's
    GPU "the default on AMD (TensorRT-LLM runs on NVIDIA GPUs only)"."""
    if default_engine(hw) == DEFAULT_ENGINE:
        return "the default engine"
    return f"the default on {str(hw.vendor).upper()} ({OTHER_VENDOR_DEFAULT[1]})"


#: Read every engine's tables (``load_measured(..., engine=ALL_ENGINES)``).
ALL_ENGINES = "all"
#: The engine of a table that belongs to none: a communication library every engine calls.
SHARED = ""

#: A collector's ``runtime.framework`` (lower case) -> the engine its tables belong to.
#: ``nccl``: NCCL's own collectives, which every engine calls; ``wideep_sglang``: DeepEP's
#: expert-parallel dispatch and combine kernels as collected under SGLang 0.5.12 (DeepEP is a
#: library of its own that the engines call for wide expert parallelism), both shared.
FRAMEWORK_ENGINES = {
    "trtllm": "trtllm",
    "tensorrt_llm": "trtllm",
    "sglang": "sglang",
    "vllm": "vllm",
    "nccl": SHARED,
    "wideep_sglang": SHARED,
}


def engine_of_framework(framework: str) -> str | None:
    """The engine of a collector's framework name, :data:`SHARED` for a shared library, or
    None for a framework mlacalc does not know."""
    return FRAMEWORK_ENGINES.get(str(framework).strip().lower())


def check_engine(
    value: Any, *, name: str = "engine", allow_all: bool = False, hw: Any = None
) -> str:
    """``value`` as an engine name (None is the default engine on ``hw``:
    :func:`default_engine`); anything else is an
    :class:`~mlacalc.words.errors.InvalidArgumentError` naming the engines."""
    if value is None:
        return default_engine(hw)
    options = ENGINES + ((ALL_ENGINES,) if allow_all else ())
    if isinstance(value, str) and value.strip().lower() in options:
        return value.strip().lower()
    shown = repr(value) if isinstance(value, str) else show_value(value)
    raise InvalidArgumentError(name, f"must be one of {', '.join(options)}, got {shown}")
