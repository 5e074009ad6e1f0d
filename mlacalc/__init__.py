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

from mlacalc.cost.engine import (
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
from mlacalc.cost.model_step import step_kernels
from mlacalc.cost.params import ParamCounts, param_counts, weight_bytes
from mlacalc.cost.symbolic import formula
from mlacalc.hardware.catalogue import HardwareSpec, load_hardware
from mlacalc.measured.validate import validate
from mlacalc.models.loading import (
    ModelConfig,
    import_hf_config,
    load_model,
    model_from_dict,
    shipped_models,
)
from mlacalc.serving.plan import Plan, plan
from mlacalc.timemodel.predict import Calibration, Prediction, predict_time
from mlacalc.words.dtypes import KV_LAYOUTS, KVLayout, dtype_bits
from mlacalc.words.errors import (
    ConfigError,
    DoesNotFitError,
    InvalidArgumentError,
    MlacalcError,
    UnknownDtypeError,
    UnknownHardwareError,
    UnknownModelError,
)

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
        from mlacalc.cost.sweep import sweep

        return sweep
    if name == "search":  # the deployment search, numpy-backed like sweep
        from mlacalc.serving.search import search

        return search
    if name == "calibrate":  # fitting a profile on measured sets (numpy)
        from mlacalc.measured.calibrate import calibrate

        return calibrate
    if name == "load_profile":  # the kernel time model's profiles (numpy)
        from mlacalc.timemodel.profile import load_profile

        return load_profile
    raise AttributeError(f"module 'mlacalc' has no attribute {name!r}")
