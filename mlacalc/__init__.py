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

import importlib as _importlib
from typing import Any as _Any

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
from mlacalc.cost.params import ParamCounts, param_counts, weight_bytes
from mlacalc.cost.symbolic import formula
from mlacalc.models.loading import (
    ModelConfig,
    import_hf_config,
    load_model,
    model_from_dict,
    shipped_models,
)
from mlacalc.words.dtypes import KV_LAYOUTS, KVLayout, dtype_bits
from mlacalc.words.errors import (
    ConfigError,
    DoesNotFitError,
    InvalidArgumentError,
    MlacalcError,
    MlacalcWarning,
    UnknownDtypeError,
    UnknownHardwareError,
    UnknownModelError,
)

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
    "forward_flops_per_token",
    "attention_cost",
    "AttentionCost",
    "OpCost",
    "attended_pairs",
    "formula",
    "model_report",
    "step_kernels",
    "sweep",
    "convert",
    "training_cost",
    "training_search",
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
    "MlacalcWarning",
    "ConfigError",
    "UnknownModelError",
    "UnknownDtypeError",
    "InvalidArgumentError",
    "UnknownHardwareError",
    "DoesNotFitError",
]


#: Names loaded on first use, so that `import mlacalc` and a plain report stay light (numpy,
#: the hardware catalogue, the planner, the time model and the measured sets load only when
#: asked for).
_LAZY = {
    "load_hardware": "mlacalc.hardware.catalogue",
    "HardwareSpec": "mlacalc.hardware.catalogue",
    "sweep": "mlacalc.cost.sweep",
    "step_kernels": "mlacalc.cost.model_step",
    "forward_flops_per_token": "mlacalc.cost.forward",
    "predict_time": "mlacalc.timemodel.predict",
    "Prediction": "mlacalc.timemodel.predict",
    "Calibration": "mlacalc.timemodel.predict",
    "plan": "mlacalc.serving.plan",
    "Plan": "mlacalc.serving.plan",
    "search": "mlacalc.serving.search",
    "validate": "mlacalc.measured.validate",
    "calibrate": "mlacalc.measured.calibrate",
    "load_profile": "mlacalc.timemodel.profile",
    "model_report": "mlacalc.report",
    "convert": "mlacalc.models.convert",
    "training_cost": "mlacalc.training.cost",
    "training_search": "mlacalc.training.layout_search",
}


def __getattr__(name: str) -> _Any:
    if name == "__version__":
        # deferred: importlib.metadata is slow to import; the version is read on first use
        from mlacalc.words.vocab import tool_version

        return tool_version()
    if name in _LAZY:
        value = getattr(_importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mlacalc' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
