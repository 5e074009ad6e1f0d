"""TensorRT-LLM's MoE backend as a choice (``moe_backend``): which kernel runs a step's routed
experts where the engine has more than one measured.

TensorRT-LLM picks its MoE kernels by ``moe_config.backend`` (from recall: ``CUTLASS`` by
default, ``TRTLLM`` for TensorRT-LLM-gen's kernels). Its B200 MoE table times nvfp4 experts
both ways: the CUTLASS MoE (``kernel_source`` ``moe_torch_flow_cutlass``, the plain class
``moe:nvfp4``) and TensorRT-LLM-gen's (``moe_torch_flow_min_latency``, the variant class
``moe:nvfp4:moe_torch_flow_min_latency``), the latter 0.47-0.72x the former's time by token
count over the calls both time. ``moe_backend=None`` times the engine's default; ``"cutlass"``
the same (named); ``"trtllm-gen"`` the min-latency class for nvfp4 experts on data-centre
Blackwell (``DeviceFigures.tcgen05``), with the row tile that class's rows were mapped with
(:func:`~mlacalc.timemodel.moe_time.engine_moe_tiles`). Its w4a8 MXFP4 experts already run
TensorRT-LLM-gen's kernel (their rows are ``moe_torch_flow``), so they keep it.

The step builders (:class:`mlacalc.serving.gpu_step.StepModel`, ``predict_time``'s model
step) mark the experts with the shape column
:data:`~mlacalc.words.kernels.TRTLLM_GEN_MOE` (:func:`runs_trtllm_gen`), which
:func:`~mlacalc.words.kernels.variant_of` turns into the variant class: every path that times
a step looks the same class up.
"""

from __future__ import annotations

from typing import Any

from mlacalc.timemodel.device import device_figures
from mlacalc.words.engines import ENGINE_LABELS
from mlacalc.words.errors import InvalidArgumentError
from mlacalc.words.kernels import MIN_LATENCY_MOE

__all__ = [
    "MOE_BACKENDS",
    "MOE_BACKEND_SETTING",
    "check_moe_backend",
    "moe_kernel_label",
    "runs_trtllm_gen",
]

#: The values of ``moe_backend`` (None: the engine's default, TensorRT-LLM's CUTLASS MoE).
MOE_BACKENDS = ("cutlass", "trtllm-gen")

#: TensorRT-LLM's ``moe_config.backend`` for each value (from recall).
MOE_BACKEND_SETTING = {"cutlass": "CUTLASS", "trtllm-gen": "TRTLLM"}

#: The MoE dtypes (the class the device runs) TensorRT-LLM's B200 tables time on its CUTLASS
#: MoE (``moe_torch_flow_cutlass``); its block-scaled fp8 experts there are DeepGEMM's kernel,
#: its w4a8 MXFP4 ones TensorRT-LLM-gen's.
_CUTLASS_TCGEN05 = ("bf16", "fp8", "nvfp4")

#: The MoE dtypes TensorRT-LLM's B200 tables time on TensorRT-LLM-gen's kernels: nvfp4 as the
#: min-latency variant (chosen), w4a8 MXFP4 as the plain class (already).
_GEN_TCGEN05 = ("nvfp4", "w4a8_mxfp4")


def _run_dtype(dtype: str, hw: Any) -> str:
    """The MoE class ``hw`` runs experts of ``dtype`` as (``kernel_time.device_batch``)."""
    from mlacalc.timemodel.kernel_time import run_dtype  # deferred: kernel_time is heavy

    runs = run_dtype("moe", dtype, hw)
    return "nvfp4" if runs == "fp4" else runs


def runs_trtllm_gen(backend: str | None, engine: str, hw: Any, dtype: str) -> bool:
    """Whether a step's routed experts of class ``dtype`` run TensorRT-LLM-gen's min-latency
    class: ``trtllm-gen`` chosen, under TensorRT-LLM, on data-centre Blackwell, nvfp4 experts.
    Anything else keeps its class (a plan's fp8 comparison step beside fp4 weights)."""
    if backend != "trtllm-gen" or engine != "trtllm" or getattr(hw, "kind", "gpu") != "gpu":
        return False
    return device_figures(hw).tcgen05 and _run_dtype(dtype, hw) == "nvfp4"


def check_moe_backend(
    backend: Any, engine: str, hw: Any, dtype: str | None, field: str = "moe_backend"
) -> str | None:
    """``backend`` checked against the engine, the device and the experts' class ``dtype``
    (None: the model has no routed experts): one of :data:`MOE_BACKENDS` or None; a value that
    does not apply is refused naming ``field`` and why."""
    if backend is None:
        return None
    if backend not in MOE_BACKENDS:
        raise InvalidArgumentError(
            field, f"must be one of {', '.join(MOE_BACKENDS)} (or left unset), got {backend!r}"
        )
    if engine != "trtllm":
        label = ENGINE_LABELS.get(engine, engine)
        raise InvalidArgumentError(
            field,
            f"is TensorRT-LLM's MoE backend (moe_config.backend); {label} picks its own MoE "
            "kernels: leave it unset or plan with engine trtllm",
        )
    if dtype is None:
        raise InvalidArgumentError(field, "the model has no routed experts: leave it unset")
    fig = device_figures(hw)
    runs = _run_dtype(dtype, hw)
    if backend == "cutlass":
        if fig.tcgen05 and runs not in _CUTLASS_TCGEN05:
            raise InvalidArgumentError(
                field,
                f"'cutlass': TensorRT-LLM's {hw.name} tables time its CUTLASS MoE for "
                f"{', '.join(_CUTLASS_TCGEN05)} experts; these ({runs}) run "
                f"{_default_kernel(runs)}: leave it unset",
            )
        return backend
    if not fig.tcgen05:
        raise InvalidArgumentError(
            field,
            f"'trtllm-gen': TensorRT-LLM-gen's MoE kernels run on data-centre Blackwell "
            f"(B200, B300, GB200, GB300), not {hw.name}: leave it unset",
        )
    if runs not in _GEN_TCGEN05:
        raise InvalidArgumentError(
            field,
            f"'trtllm-gen': TensorRT-LLM's tables time TensorRT-LLM-gen's MoE for nvfp4 experts "
            f"(fp4 weights) and w4a8 MXFP4 ones only, not {runs}: leave it unset",
        )
    return backend


def _default_kernel(runs: str) -> str:
    """The kernel TensorRT-LLM's Blackwell tables time for a MoE class outside its CUTLASS
    MoE's."""
    return {
        "fp8_block": "DeepGEMM's grouped GEMM",
        "w4a8_mxfp4": "TensorRT-LLM-gen's MoE",
    }.get(runs, "another kernel")


def moe_kernel_label(engine: str, hw: Any, dtype: str, gen: bool, prof: Any = None) -> str:
    """The MoE kernel a step's routed experts of class ``dtype`` were timed as under
    TensorRT-LLM, in words with the class (``gen``: :func:`runs_trtllm_gen`); ``prof``: the
    timing profile (None: not checked). A profile whose lookup
    (:meth:`~mlacalc.timemodel.profile.Profile.class_found`) finds no TensorRT-LLM-gen class
    times those experts with its own fallback, which the words say (a review: ``--profile
    fit-h100-sxm`` named a class the profile does not hold)."""
    runs = _run_dtype(dtype, hw)
    if gen:
        key = f"moe:{runs}:{MIN_LATENCY_MOE}"
        if prof is not None and prof.class_found(hw.name, "moe", runs, hw, MIN_LATENCY_MOE) != key:
            return (
                f"TensorRT-LLM-gen's MoE, which the profile has no fit of ({key}): timed with "
                "its fallback class for these experts (fit-b200-sxm holds the class)"
            )
        return f"TensorRT-LLM-gen's MoE ({key})"
    if engine == "trtllm" and device_figures(hw).tcgen05:
        name = "CUTLASS MoE" if runs in _CUTLASS_TCGEN05 else _default_kernel(runs)
        return f"{name} (moe:{runs})"
    return f"moe:{runs}"
