"""What a timed step reports: the roof it is nearest, its link time, and its kernels as rows
with what they cover. No numpy: the step's kernels are plain records here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mlacalc.hardware.catalogue import HardwareSpec
from mlacalc.words.kernels import roofline_bound

if TYPE_CHECKING:
    from mlacalc.serving.gpu_step import StepModel

__all__ = ["kernel_rows", "kernels_scope", "links_seconds", "step_bound"]


def step_bound(
    hw: HardwareSpec,
    st_kernels: list[dict[str, Any]],
    compute_s: float,
    comm_s: float,
    overlap: str = "none",
    links_s: float | None = None,
) -> str:
    """Which roof the step is nearest: communication when the links take longer than the
    kernels, else compute or memory by the step's summed FLOPs and bytes at the datasheet
    rates. Under two-batch overlap ``comm_s`` is the link time the overlap leaves exposed and
    ``links_s`` all of it (both micro-batches'): the step is communication-bound when the
    links take longer than the kernels, not whenever some link time is exposed (30 ms of a
    111 ms step whose links take 61 ms against 81 ms of kernels is compute-bound, its links
    partly exposed)."""
    links = comm_s if links_s is None else links_s
    if links > compute_s:
        return "communication"
    flops = sum(float(k["flops"][0]) * k["calls"] for k in st_kernels if not k["communication"])
    nbytes = sum(float(k["bytes"][0]) * k["calls"] for k in st_kernels if not k["communication"])
    # the one rule of every bound label: intensity against the ridge (here bf16's, the rate
    # the step's attention and activations run at)
    return roofline_bound(flops, nbytes, hw.peak("bf16") / hw.memory_bandwidth_bytes_per_s)


def links_seconds(kernels: list[dict[str, Any]], comm_s: float, overlap: str) -> float:
    """The step's link time, exposed or not: ``comm_s`` without overlap; under two-batch
    overlap, both micro-batches' links (``kernels`` are one micro-batch's)."""
    if overlap != "tbo":
        return comm_s
    return 2.0 * sum(float(k["seconds"][0]) for k in kernels if k["communication"])


def kernels_scope(sm: StepModel, overlap: str, dec_B: float) -> str | None:
    """What the kernel rows of a step cover, in words, where it is not the whole step of one
    GPU (None there): ``dec_B`` is the sequences per attention group of one pipeline
    micro-batch."""
    lay, layers = sm.lay, sm.m.num_hidden_layers
    per = " per attention group" if lay.dp > 1 else ""
    hidden = "links hidden behind the other's kernels as far as they go"
    if lay.pp == 1:
        if overlap != "tbo":
            return None
        return (
            f"one of the two micro-batches of a two-batch-overlap step ({dec_B / 2:,.4g} "
            f"sequences{per}): the step runs every kernel twice, each micro-batch's {hidden}"
        )
    stage = max(nd + nm for nd, nm in sm.stage_counts)
    if overlap == "tbo":
        text = (
            f"one two-batch-overlap half ({dec_B / 2:,.4g} sequences{per}) of one pipeline "
            f"micro-batch ({dec_B:,.4g})"
        )
        runs = f"twice (the two halves, each one's {hidden}) for each of the {lay.pp}"
    else:
        text = f"one pipeline micro-batch ({dec_B:,.4g} sequences{per})"
        runs = f"for each of the {lay.pp}"
    return (
        f"{text} through all {layers} layers: the {lay.pp} pipeline stages together, so the "
        f"calls are the whole model's; a GPU holds its stage's layers (at most {stage}) and "
        f"runs them {runs} micro-batches in flight"
    )


def kernel_rows(kernels: list[dict[str, Any]], i: int = 0) -> tuple[dict[str, Any], ...]:
    """The kernels of row ``i`` of a timed step as :attr:`mlacalc.Plan.kernels` lists them:
    those the step runs, each with its calls, FLOPs and bytes per call and time."""
    rows = []
    for k in kernels:
        if not float(k["seconds"][i]):
            continue  # a kernel this step does not run
        rows.append(
            {
                "name": k["name"],
                "kind": k["kind"],
                "dtype": k["dtype"],
                "part": k["part"],
                "calls": k["calls"],
                "flops_per_call": float(k["flops"][i]),
                "bytes_per_call": float(k["bytes"][i]),
                "seconds": float(k["seconds"][i]),
                "communication": k["communication"],
                # the class variant it was looked up by ("": the plain class)
                "variant": k.get("variant", ""),
            }
        )
    return tuple(rows)
