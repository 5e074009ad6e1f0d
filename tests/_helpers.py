"""Set-up the tests share: the app at a URL through AppTest, plan() of a search point, and a
causal prompt's kernel batch for the time model.

Not a test module (pytest collects ``test_*.py``); imported as ``from _helpers import ...``
(the tests directory is on the path, as for ``reference_data``). A test module that uses the
app still skips itself without streamlit (``pytest.importorskip``) before importing these.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from mlacalc.words.kernels import KernelBatch

#: The Streamlit app the app tests run.
APP = str(Path(__file__).resolve().parent.parent / "app.py")


def app_test(script: str | Path = APP) -> Any:
    """An AppTest of the app (or of ``script``), 120 s a run, that shares one registry of the
    installed packages' Streamlit components with the process's other AppTests: an AppTest
    scans the metadata of every installed distribution for components on its first run (about
    0.2 s of CPU, half a planner run whose figures are cached), and what is installed does not
    change while the tests run. Where streamlit keeps no such registry, the AppTest is as
    ``AppTest.from_file`` makes it."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(script), default_timeout=120)
    shared = _components()
    if shared is not None and getattr(at, "_bidi_component_manager", False) is None:
        at._bidi_component_manager = shared
    return at


@cache
def _components() -> Any:
    """The installed packages' Streamlit components, scanned once a process as an AppTest's
    first run scans them (None where streamlit has no such scan)."""
    try:
        from streamlit.components.v2.component_manager import BidiComponentManager
    except ImportError:
        return None
    manager = BidiComponentManager()
    manager.discover_and_register_components(start_file_watching=False)
    return manager


def run_app(view: str | None = None, **query: str) -> Any:
    """The app at a URL (``query``: its parameters), with the tab ``view`` open (the first
    tab when None), run once with no exception."""
    if view is not None:
        query["view"] = view
    at = app_test()
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def metrics(at: Any) -> dict[str, str]:
    """The app's metrics, label -> value."""
    return {m.label: m.value for m in at.metric}


def plan_point(model: Any, hardware: str, point: dict, isl: int, osl: int, **kw: Any) -> Any:
    """plan() of a search point's deployment at its concurrency: its decode pool's GPUs and
    layout and its KV dtype, a disaggregated point's prefill pool; ``kw`` adds arguments
    (a weight dtype, a chunk budget, an engine's scheduler) or overrides these."""
    from mlacalc.serving.plan import plan

    args: dict[str, Any] = dict(
        tp=point["tp"],
        ep=point["ep"],
        pp=point["pp"],
        dp_attention=point["dp_attention"],
        redundant_experts=point["redundant_experts"],
        overlap=point["overlap"],
        kv_dtype=point["kv_dtype"],
        isl=isl,
        osl=osl,
        concurrency=point["concurrency"],
    )
    if point["mode"] == "disaggregated":
        args.update(
            mode="disaggregated",
            prefill_gpus=point["prefill_gpus"],
            prefill_tp=point["prefill_tp"],
            prefill_ep=point["prefill_ep"],
            prefill_dp_attention=point["prefill_dp_attention"],
            prefill_redundant_experts=point["prefill_redundant_experts"],
        )
    return plan(model, hardware, point["decode_gpus"], **{**args, **kw})


def causal_prompt_batch(
    kind: str, dtype: str, isl: float, heads: float, d_qk: float, d_v: float, variant: str = ""
) -> KernelBatch:
    """One causal prompt of ``isl`` tokens as a one-call kernel batch of ``kind``: one
    sequence, ``heads`` query and key heads, no window, its FLOPs those of the causal pairs."""
    pairs = isl * (isl + 1) / 2
    shape = {
        "batch": 1.0,
        "q_len": isl,
        "kv_len": isl,
        "n_heads": heads,
        "n_kv": heads,
        "head_dim_qk": d_qk,
        "head_dim_v": d_v,
        "window": 0.0,
        "causal": 1.0,
    }
    return KernelBatch(
        kind=kind,
        dtype=dtype,
        flops=np.array([2.0 * heads * pairs * (d_qk + d_v)]),
        bytes=np.array([1e6]),
        calls=np.array([1.0]),
        shape={k: np.array([v]) for k, v in shape.items()},
        variant=variant,
    )
