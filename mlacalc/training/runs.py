"""Published training runs, each with its layout and throughput, to check the step time against.

Each run is quoted from its report (source, section and the figure as printed); where a report
leaves a setting out, the run says what mlacalc assumes. No constant of the step-time model is
fitted to these figures: they are the benchmark (``benchmarks/bench_training.py``), and
``tests/test_training_runs.py`` holds the errors within the bounds stated there.

- DeepSeek-V3 (arXiv 2412.19437): "DeepSeek-V3 requires only 180K H800 GPU hours" per trillion
  tokens (Table 1 and section 1: 2,664K GPU hours for 14.8T tokens of pre-training); 2,048
  H800 GPUs, "16-way Pipeline Parallelism (PP), 64-way Expert Parallelism (EP) spanning 8
  nodes, and ZeRO-1 Data Parallelism (DP)", no tensor parallelism (section 3.2); FP8 mixed
  precision with BF16 AdamW moments (3.3); "Recomputation of RMSNorm and MLA Up-Projection"
  (3.2.3); DualPipe, "full computation-communication overlap" (3.2.1), with 20 SMs kept for
  communication (3.2.2); 4K sequences, batch
  size 15,360 sequences after the ramp (4.2). Assumed: micro-batch 1 sequence.
- DeepSeek-V2 (arXiv 2405.04434): 172.8K H800 GPU hours per trillion tokens (section 3.1.4);
  "16-way zero-bubble pipeline parallelism, 8-way expert parallelism, and ZeRO-1 data
  parallelism" (3.1.3); 4K sequences, batch 9,216 sequences after the ramp (3.1.2).
  Assumed: 1,024 GPUs (not stated), micro-batch 1, BF16 mixed precision, no recompute (the
  report recomputes "a portion of the operators", from recall, without saying which; with
  none the layout does not fit an H800, 111.8 GiB a GPU, and the row says so: full recompute
  fits and gives +17.0%, docs/training.md); the zero-bubble schedule as ZB-H1 (``zb-h1``:
  the variant with 1F1B's memory; which variant HAI-LLM ran is not stated, from recall of Qi
  et al. 2023).
- Llama 3 405B (arXiv 2407.21783, Table 4): on H100 (BF16), 8,192 GPUs at TP 8, CP 1, PP 16,
  DP 64, sequence 8,192, batch per DP rank 32: 430 TFLOPs/GPU, 43% BF16 MFU; 16,384 GPUs at
  DP 128, batch per DP rank 16: 400 TFLOPs/GPU, 41% MFU. Assumed: micro-batch 1, no
  recompute, communication not overlapped; one layer fewer on the first and the last stage
  (7, 8 x 14, 7 of the 126: the paper's balancing of the embedding and the output head, from
  recall), the 1F1B schedule (the paper's interleaved one with a number of virtual stages it
  does not give, from recall, is not assumed).

A run's published throughput is tokens per second per GPU (DeepSeek, from GPU hours per
trillion tokens) or MFU (Llama 3, by Meta's count of FLOPs); each is compared in its own unit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlacalc.training.cost import training_cost

__all__ = ["PUBLISHED_RUNS", "Run", "compare_runs"]


@dataclass(frozen=True)
class Run:
    """A published training run: model, device, layout, settings and its throughput."""

    name: str
    model: str
    hardware: str
    seq_len: int
    tp: int
    pp: int
    dp: int
    ep: int
    global_batch: int
    precision: str
    recompute: str
    overlap: bool
    comm_sms: int
    metric: str  # "tokens_per_s_per_gpu" or "mfu"
    published: float
    source: str
    #: the layers of each pipeline stage (``training_cost``'s ``stage_layers``); None: even
    stage_layers: str | None = None
    #: the pipeline schedule (``training_cost``'s ``schedule``)
    schedule: str = "1f1b"
    #: what the published run did to fit its memory that the assumed layout leaves out
    #: (docs/training.md, "Why the published layouts do not fit"), said where it does not fit
    memory_note: str = ""


def _per_gpu(gpu_hours_per_trillion: float) -> float:
    return 1e12 / (gpu_hours_per_trillion * 3600)


PUBLISHED_RUNS = (
    Run(
        "DeepSeek-V3 pre-training",
        "deepseek-v3",
        "H800",
        4096,
        1,
        16,
        128,
        64,
        15360,
        "fp8-mixed",
        "kv_up",
        True,
        20,
        "tokens_per_s_per_gpu",
        _per_gpu(180e3),
        "arXiv 2412.19437, Table 1, sections 3.2 and 4.2: 180K H800 GPU hours per 1T tokens",
        memory_note=(
            "the report recomputes the RMSNorms and all of MLA's up-projections (section "
            "3.2.3; kv_up redoes K and V, not the query) and keeps activations in FP8 (from "
            "recall), not modelled"
        ),
    ),
    Run(
        "DeepSeek-V2 pre-training",
        "deepseek-v2",
        "H800",
        4096,
        1,
        16,
        64,
        8,
        9216,
        "bf16-mixed",
        "none",
        False,
        0,
        "tokens_per_s_per_gpu",
        _per_gpu(172.8e3),
        "arXiv 2405.04434, section 3.1: 172.8K H800 GPU hours per 1T tokens",
        schedule="zb-h1",
        memory_note=(
            "the report recomputes 'a portion of the operators' (section 3.1.3) without "
            "naming them; full recompute fits"
        ),
    ),
    Run(
        "Llama 3 405B, 8,192 GPUs",
        "llama-3.1-405b",
        "H100",
        8192,
        8,
        16,
        64,
        1,
        2048,
        "bf16-mixed",
        "none",
        False,
        0,
        "mfu",
        0.43,
        "arXiv 2407.21783, Table 4: 43% MFU",
        stage_layers="7,..,7",
        memory_note="within the H100's 80 GiB, not the 10% the planner keeps apart",
    ),
    Run(
        "Llama 3 405B, 16,384 GPUs",
        "llama-3.1-405b",
        "H100",
        8192,
        8,
        16,
        128,
        1,
        2048,
        "bf16-mixed",
        "none",
        False,
        0,
        "mfu",
        0.41,
        "arXiv 2407.21783, Table 4: 41% MFU",
        stage_layers="7,..,7",
        memory_note="within the H100's 80 GiB, not the 10% the planner keeps apart",
    ),
)


def compare_runs(runs: tuple[Run, ...] = PUBLISHED_RUNS, profile: Any = None) -> list[dict]:
    """Each run's predicted throughput against the published one, with the relative error."""
    rows = []
    for r in runs:
        c = training_cost(
            r.model,
            r.seq_len,
            1,
            "expanded",
            r.recompute,
            r.hardware,
            r.tp,
            r.pp,
            r.dp,
            r.ep,
            r.global_batch,
            "adamw",
            r.precision,
            1,
            profile=profile,
            overlap=r.overlap,
            comm_sms=r.comm_sms,
            stage_layers=r.stage_layers,
            schedule=r.schedule,
        )
        predicted = c.mfu if r.metric == "mfu" else c.tokens_per_s_per_gpu
        rows.append(
            {
                "run": r.name,
                "metric": r.metric,
                "published": r.published,
                "predicted": predicted,
                "error": predicted / r.published - 1,
                "mfu": c.mfu,
                "tokens_per_s_per_gpu": c.tokens_per_s_per_gpu,
                "step_s": c.time.step_s,
                # whether the assumed layout fits the device's memory (None: not known)
                "fits": c.fits,
                "memory_per_gpu": c.memory_per_gpu,
                "usable_memory_bytes": c.usable_memory_bytes,
                "device_memory_bytes": c.device_memory_bytes,
                "memory_note": r.memory_note,
                "source": r.source,
            }
        )
    return rows
