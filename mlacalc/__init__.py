"""mlacalc: what an attention design costs, exactly.

An analytical cost model of transformer attention (MHA, GQA, MQA and DeepSeek's
multi-head latent attention in each implementation): KV-cache bytes, parameter
counts, FLOPs and memory traffic, derived as sympy formulas and evaluated as exact
integers.

>>> import mlacalc
>>> m = mlacalc.load_model("deepseek-v3")
>>> mlacalc.kv_cache_bytes(m, seq_len=131072, batch=8) / 2**30
68.625
>>> mlacalc.param_counts(m).total
671026419200
"""

from __future__ import annotations

from importlib import metadata as _metadata

from .config import ModelConfig, import_hf_config, load_model, model_from_dict, shipped_models
from .dtypes import KV_LAYOUTS, KVLayout, dtype_bits
from .engine import (
    AttentionCost,
    KVCache,
    OpCost,
    attended_pairs,
    attention_cost,
    attention_flops,
    attention_params,
    kv_cache,
    kv_cache_bytes,
)
from .errors import (
    ConfigError,
    DoesNotFitError,
    InvalidArgumentError,
    MlacalcError,
    UnknownDtypeError,
    UnknownHardwareError,
    UnknownModelError,
)
from .hardware import HardwareSpec, load_hardware
from .params import ParamCounts, param_counts, weight_bytes
from .planner import Plan, plan
from .roofline import Calibration, Prediction, predict_time
from .step import step_kernels
from .symbolic import formula
from .validation import validate

try:
    __version__ = _metadata.version("mlacalc")
except _metadata.PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.0.0+unknown"

__all__ = [  # noqa: RUF022  (grouped by topic)
    "__version__",
    # configs
    "ModelConfig",
    "load_model",
    "model_from_dict",
    "import_hf_config",
    "shipped_models",
    # dtypes
    "KVLayout",
    "KV_LAYOUTS",
    "dtype_bits",
    # costs
    "param_counts",
    "ParamCounts",
    "weight_bytes",
    "attention_params",
    "kv_cache",
    "kv_cache_bytes",
    "KVCache",
    "attention_flops",
    "attention_cost",
    "AttentionCost",
    "OpCost",
    "attended_pairs",
    "formula",
    "step_kernels",
    "sweep",
    # hardware, roofline, planning
    "load_hardware",
    "HardwareSpec",
    "predict_time",
    "Prediction",
    "Calibration",
    "plan",
    "Plan",
    "search",
    "validate",
    "calibrate",
    "load_profile",
    # errors
    "MlacalcError",
    "ConfigError",
    "UnknownModelError",
    "UnknownDtypeError",
    "InvalidArgumentError",
    "UnknownHardwareError",
    "DoesNotFitError",
]


def __getattr__(name: str):
    # numpy is imported only when a sweep is asked for, so a plain report stays fast.
    if name == "sweep":
        from .vectorized import sweep

        return sweep
    if name == "search":  # the deployment search, numpy-backed like sweep
        from .serving.search import search

        return search
    if name in ("calibrate", "load_profile"):  # the kernel time model's profiles
        from . import timemodel

        return getattr(timemodel, name)
    raise AttributeError(f"module 'mlacalc' has no attribute {name!r}")
