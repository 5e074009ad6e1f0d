"""Published serving measurements, and the planner's prediction of each.

Each scenario is quoted from its source with everything the source states about it; what the
source leaves open is set the way the planner always sets it (its defaults), never to make
one row fit. :func:`compare` predicts every row and returns its errors
(``predicted / measured - 1``); ``benchmarks/bench_serving.py`` prints them and the tests
bound them.

- ``TRTLLM_ONLINE``: TensorRT-LLM's online-serving table (``NVIDIA/TensorRT-LLM@258c7540:
  docs/source/performance/perf-overview.md``, "generated using version 0.14.0, with 500
  requests and BF16 precision", Triton backend): Llama-3.1 70B at TP4 and 8B at TP1 on H100
  SXM and H200, mean TTFT, mean ITL and output tokens/s at a fixed request rate. The rows kept
  are those whose achieved request rate equals the offered one (the server kept up); beyond
  that the batch limit, which the source does not state, decides the figures. Requests arrive
  at random at the stated rate; each step runs the prompts that arrived in a forward pass of
  their own before the decode pass (``prefill_pass="separate"``): the source does not state
  it, the table does (every prompt slows the running sequences by its whole prefill, not by
  what it adds to a shared pass, and the measured TTFT is the wait, the prefill and one decode
  pass at every rate, prompt, model and GPU, idle or busy); one rule for every row, nothing
  fitted.
- ``TRTLLM_OFFLINE``: TensorRT-LLM's offline max-throughput table (``NVIDIA/TensorRT-LLM@
  258c7540:docs/source/performance/perf-overview.md``, version 0.17, FP8 weights, "the KV cache
  will automatically be set to FP8", requests "at an infinite rate"): output tokens/s of the
  whole TP group for Llama-3.1 8B and 70B on H100 and H200 at each ISL/OSL. The planner runs as
  many sequences as fit, with the cache given 95% of the memory the weights leave (the
  source's ``kv_cache_free_gpu_mem_fraction 0.95``) in 16-token pages; the realized batch is
  not stated by the source.
- ``SGLANG_EP72``: LMSYS, "Deploying DeepSeek with PD Disaggregation and Large-scale Expert
  Parallelism on 96 H100 GPUs" (``lm-sys/lm-sys.github.io@2db4e404:blog/2025-05-05-
  large-scale-ep.md``): the decode pool of 9 nodes x 8 H100 at EP72 with DP-attention, 32
  redundant experts, DeepEP low-latency, two-batch overlap, 256 sequences per GPU with 2,000
  tokens of KV: 22,282 output tokens/s per node; and its prefill pool of 4 nodes at EP32 with
  16,384 prompt tokens per GPU per pass (DeepEP normal kernels, two-batch overlap): 57,674,
  54,543 and 50,302 input tokens/s per node for 1K, 2K and 4K prompts.
- ``DEEPSEEK``: DeepSeek's inference-system figures on H800. Its profile
  (``deepseek-ai/profile-data@44960242:README.md``, as SGLang's large-scale EP post derives
  per-node figures from it): decode at EP128 with DP-attention, 128 requests per GPU at 4K
  tokens, "an absolutely balanced MoE routing strategy": 18,598 output tokens/s per node;
  prefill at EP32, 16,384 tokens per GPU of 4K prompts: 62,713 input tokens/s per node. And the
  Day-6 post (``deepseek-ai/open-infra-index@3122a252:202502OpenSourceWeek/day_6_...md``):
  decode at EP144 with 32 redundant experts (18 nodes), 14,800 output tokens/s per node, an
  average KV length of 4,989, the batch not stated (SGLang's table takes 128 per GPU; so does
  the planner, saying so), a day's average rather than a peak. Both with two-batch overlap
  (DeepSeek's five-stage decode pipeline is not modelled beyond it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mlacalc.cost.engine import as_model
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving.gpu_step import StepModel
from mlacalc.serving.layout import make_layout
from mlacalc.serving.plan import plan
from mlacalc.words.dtypes import resolve_kv_layout

__all__ = [
    "DEEPSEEK",
    "SGLANG_EP32_PREFILL",
    "SGLANG_EP72",
    "TRTLLM_OFFLINE",
    "TRTLLM_ONLINE",
    "OnlineRow",
    "compare",
    "compare_deepseek",
    "compare_offline",
    "compare_sglang",
    "compare_sglang_prefill",
]


@dataclass(frozen=True)
class OnlineRow:
    """One row of the TensorRT-LLM online table (times in ms, throughput in output tokens/s)."""

    model: str
    hardware: str
    tp: int
    isl: int
    osl: int
    qps: float
    ttft_ms: float
    itl_ms: float
    output_tokens_per_s: float


_ROWS = """
llama-3.1-70b H100-SXM 4 467 256 2 62 21 498
llama-3.1-70b H100-SXM 4 467 256 4 68 24 973
llama-3.1-70b H100-SXM 4 467 256 8 92 32 1860
llama-3.1-70b H100-SXM 4 467 16 2 53 18 28
llama-3.1-70b H100-SXM 4 467 16 4 58 20 63
llama-3.1-70b H100-SXM 4 467 16 8 71 24 126
llama-3.1-70b H100-SXM 4 467 16 16 109 38 248
llama-3.1-70b H100-SXM 4 202 214 2 48 20 401
llama-3.1-70b H100-SXM 4 202 214 4 51 22 771
llama-3.1-8b H100-SXM 1 467 256 2 23 8 504
llama-3.1-8b H100-SXM 1 467 256 4 24 9 929
llama-3.1-8b H100-SXM 1 467 256 8 26 9 1959
llama-3.1-8b H100-SXM 1 467 16 2 19 7 32
llama-3.1-8b H100-SXM 1 467 16 4 20 7 63
llama-3.1-8b H100-SXM 1 467 16 8 22 7 126
llama-3.1-8b H100-SXM 1 467 16 16 24 8 251
llama-3.1-8b H100-SXM 1 202 214 2 19 7 416
llama-3.1-8b H100-SXM 1 202 214 4 20 8 816
llama-3.1-70b H200 4 467 256 2 58 18 499
llama-3.1-70b H200 4 467 256 4 63 20 980
llama-3.1-70b H200 4 467 16 2 50 15 32
llama-3.1-70b H200 4 467 16 4 55 16 63
llama-3.1-70b H200 4 467 16 8 67 20 126
llama-3.1-70b H200 4 467 16 16 103 33 248
llama-3.1-70b H200 4 202 214 2 43 17 408
llama-3.1-70b H200 4 202 214 4 46 18 784
llama-3.1-8b H200 1 467 256 2 21 6 504
llama-3.1-8b H200 1 467 256 4 23 7 1001
llama-3.1-8b H200 1 467 256 8 24 7 1971
llama-3.1-8b H200 1 467 16 2 18 5 32
llama-3.1-8b H200 1 467 16 4 19 6 63
llama-3.1-8b H200 1 467 16 8 20 6 126
llama-3.1-8b H200 1 467 16 16 22 7 250
llama-3.1-8b H200 1 202 214 2 17 6 418
llama-3.1-8b H200 1 202 214 4 18 6 822
"""

_OFFLINE = """
llama-3.1-8b 1 128 128 29526.04 28836.77
llama-3.1-8b 1 128 2048 25398.86 21109.38
llama-3.1-8b 1 128 4096 17370.8 13593.65
llama-3.1-8b 1 500 2000 21020.81 16500.69
llama-3.1-8b 1 1000 1000 17537.96 15244.78
llama-3.1-8b 1 2048 128 3794.14 3556.73
llama-3.1-8b 1 2048 2048 11968.5 9488.42
llama-3.1-8b 1 5000 500 3987.79 3559.36
llama-3.1-8b 1 20000 2000 1804.1 1401.31
llama-3.1-70b 1 128 128 4020.75 3378.03
llama-3.1-70b 1 128 2048 4165.68 911.62
llama-3.1-70b 1 128 4096 2651.75 426.32
llama-3.1-70b 1 500 2000 3018.39 775.57
llama-3.1-70b 1 1000 1000 2823.45 839.97
llama-3.1-70b 1 2048 128 465.99 343.29
llama-3.1-70b 1 2048 2048 1913.8 -
llama-3.1-70b 1 5000 500 560.16 245.34
llama-3.1-70b 1 20000 2000 279.52 -
llama-3.1-70b 2 128 128 6823.01 6645.12
llama-3.1-70b 2 128 2048 8290.35 6169.58
llama-3.1-70b 2 128 4096 6526.67 3897.06
llama-3.1-70b 2 500 2000 6848.02 4972.57
llama-3.1-70b 2 1000 1000 5164.76 4390.53
llama-3.1-70b 2 2048 128 809 772.66
llama-3.1-70b 2 2048 2048 4183.88 2898.16
llama-3.1-70b 2 5000 500 1025.38 919.73
llama-3.1-70b 2 20000 2000 640.62 443.01
llama-3.1-70b 4 128 128 11098.63 11127.53
llama-3.1-70b 4 128 2048 14156 11511.93
llama-3.1-70b 4 128 4096 10574.06 7439.41
llama-3.1-70b 4 500 2000 12452.79 9836.7
llama-3.1-70b 4 1000 1000 8911.29 7430.99
llama-3.1-70b 4 2048 128 1358.06 1302.6
llama-3.1-70b 4 2048 2048 7130.44 5480.03
llama-3.1-70b 4 5000 500 1811.55 1602.78
llama-3.1-70b 4 20000 2000 1199.68 920.19
"""

#: Offline rows: (model, tp, isl, osl, hardware, output tokens/s); blanks in the source left out.
TRTLLM_OFFLINE: tuple[tuple[str, int, int, int, str, float], ...] = tuple(
    (r[0], int(r[1]), int(r[2]), int(r[3]), hw, float(v))
    for r in (line.split() for line in _OFFLINE.strip().splitlines())
    for hw, v in (("H200", r[4]), ("H100-SXM", r[5]))
    if v != "-"
)

#: The online rows whose achieved request rate equals the offered one.
TRTLLM_ONLINE: tuple[OnlineRow, ...] = tuple(
    OnlineRow(
        r[0],
        r[1],
        int(r[2]),
        int(r[3]),
        int(r[4]),
        float(r[5]),
        float(r[6]),
        float(r[7]),
        float(r[8]),
    )
    for r in (line.split() for line in _ROWS.strip().splitlines())
)

#: The SGLang decode pool: layout, load and the measured output tokens/s per node.
SGLANG_EP72: dict[str, Any] = {
    "model": "deepseek-v3",
    "hardware": "H100-SXM",
    "gpus": 72,
    "tp": 1,
    "ep": 72,
    "dp_attention": True,
    "redundant_experts": 32,
    "overlap": "tbo",
    "batch_per_gpu": 256,
    "kv_len": 2000,
    "gpus_per_node": 8,
    "output_tokens_per_s_per_node": 22282.0,
}


#: The SGLang prefill pool: prompt length -> measured input tokens/s per node.
SGLANG_EP32_PREFILL: dict[int, float] = {1024: 57674.0, 2048: 54543.0, 4096: 50302.0}


def compare_sglang_prefill(profile: Any = None, routing: str = "random") -> list[dict[str, Any]]:
    """The SGLang EP32 prefill node at each prompt length: predicted vs measured tokens/s
    (``routing="balanced"``: as the blog's simulated perfect balance routes, over every
    expert, no group limit)."""
    m = as_model("deepseek-v3")
    hw = load_hardware("H100-SXM")
    lay = make_layout(m, 32, tp=1, ep=32, dp_attention=True, redundant_experts=32)
    sm = StepModel(m, lay, None, resolve_kv_layout("bf16"), hw, profile, routing=routing)
    out = []
    for isl, measured in SGLANG_EP32_PREFILL.items():
        prompts = 16384 // isl
        st = sm.step(overlap="tbo", pf_N=np.array([float(prompts)]), pf_q=isl)
        t = float(st.seconds[0])
        per_node = 8 * prompts * isl / t
        # the prompt attention core (one micro-batch's call, and the pass's: two micro-batches
        # of every layer), the only kernel whose time moves with the prompt length at a fixed
        # 16,384 tokens per GPU
        core = next(k for k in st.kernels if k["name"] == "attention")
        out.append(
            {
                "isl": isl,
                "predicted_tokens_per_s_per_node": per_node,
                "measured_tokens_per_s_per_node": measured,
                "error": per_node / measured - 1,
                "pass_s": t,
                "measured_pass_s": 8 * prompts * isl / measured,
                "attention_call_s": float(core["seconds_per_call"][0]),
                "attention_s": 2 * float(core["seconds"][0]),
            }
        )
    return out


#: DeepSeek's H800 figures (see the module docstring): name -> scenario.
DEEPSEEK: dict[str, dict[str, Any]] = {
    "profile decode EP128": {
        "gpus": 128,
        "ep": 128,
        "redundant_experts": 0,
        "batch_per_gpu": 128,
        "kv_len": 4096,
        "routing": "balanced",
        "tokens_per_s_per_node": 18598.0,
    },
    "profile prefill EP32": {
        "gpus": 32,
        "ep": 32,
        "redundant_experts": 0,
        "prompt_tokens_per_gpu": 16384,
        "isl": 4096,
        "routing": "balanced",
        "tokens_per_s_per_node": 62713.0,
    },
    "day-6 decode EP144": {
        "gpus": 144,
        "ep": 144,
        "redundant_experts": 32,
        "batch_per_gpu": 128,  # not stated by the post: SGLang's table's assumption
        "kv_len": 4989,
        "routing": "random",
        "tokens_per_s_per_node": 14800.0,
    },
}


def compare_deepseek(profile: Any = None) -> list[dict[str, Any]]:
    """DeepSeek's H800 figures: predicted against published tokens/s per node (8 GPUs)."""
    m, hw = as_model("deepseek-v3"), load_hardware("H800")
    out = []
    for name, s in DEEPSEEK.items():
        lay = make_layout(
            m,
            s["gpus"],
            tp=1,
            ep=s["ep"],
            dp_attention=True,
            redundant_experts=s["redundant_experts"],
        )
        sm = StepModel(m, lay, None, resolve_kv_layout("bf16"), hw, profile, routing=s["routing"])
        if "isl" in s:
            prompts = s["prompt_tokens_per_gpu"] // s["isl"]
            t = float(sm.step(overlap="tbo", pf_N=float(prompts), pf_q=s["isl"]).seconds[0])
            tokens = prompts * s["isl"]
        else:
            t = float(
                sm.step(overlap="tbo", dec_B=float(s["batch_per_gpu"]), dec_S=s["kv_len"]).seconds[
                    0
                ]
            )
            tokens = s["batch_per_gpu"]
        per_node = 8 * tokens / t
        out.append(
            {
                "scenario": name,
                "predicted_tokens_per_s_per_node": per_node,
                "measured_tokens_per_s_per_node": s["tokens_per_s_per_node"],
                "error": per_node / s["tokens_per_s_per_node"] - 1,
                "step_s": t,
            }
        )
    return out


def _model_name(name: str) -> str:
    """The shipped config of a published model (Llama-3.1 has Llama-3's shapes)."""
    return {"llama-3.1-70b": "llama-3-70b", "llama-3.1-8b": "llama-3-8b"}.get(name, name)


def compare(
    rows: tuple[OnlineRow, ...] = TRTLLM_ONLINE,
    profile: Any = None,
    prefill_pass: str = "separate",
    lag_steps: int = 0,
) -> list[dict[str, Any]]:
    """Predict every online row at its request rate (bf16 weights and cache, as the source ran),
    each step running its prompts as ``prefill_pass`` says, each token reaching the client
    ``lag_steps`` steps after the step that computes it."""
    out = []
    for r in rows:
        p = plan(
            _model_name(r.model),
            r.hardware,
            r.tp,
            isl=r.isl,
            osl=r.osl,
            request_rate=r.qps,
            weight_dtype="bf16",
            kv_dtype="bf16",
            output_lag_steps=lag_steps,
            prefill_pass=prefill_pass,
            profile=profile,
        )
        pred = {
            "ttft_ms": p.ttft_s * 1e3,
            "itl_ms": p.tpot_s * 1e3,
            "output_tokens_per_s": p.output_tokens_per_s,
        }
        row = {**r.__dict__, **{f"predicted_{k}": v for k, v in pred.items()}}
        for k, v in pred.items():
            row[f"error_{k}"] = v / getattr(r, k) - 1
        out.append(row)
    return out


def compare_offline(profile: Any = None) -> list[dict[str, Any]]:
    """Predict every offline row with as many sequences as fit; a row whose deployment does
    not fit (weights and one sequence's cache) is returned with ``fits`` false."""
    out = []
    for model, tp, isl, osl, hw, measured in TRTLLM_OFFLINE:
        kw = dict(
            isl=isl, osl=osl, weight_dtype="fp8", kv_dtype="fp8", page_size=16, profile=profile
        )
        first = plan(_model_name(model), hw, tp, memory_reserve=0.0, **kw)
        free = first.memory_per_gpu_bytes - first.weights_per_gpu_bytes
        reserve = max(0.05 * free, 0) / first.memory_per_gpu_bytes  # 5% of what the weights leave
        p = plan(_model_name(model), hw, tp, memory_reserve=reserve, **kw)
        row = {
            "model": model,
            "hardware": hw,
            "tp": tp,
            "isl": isl,
            "osl": osl,
            "output_tokens_per_s": measured,
            "fits": p.fits,
            "overflow": p.overflow,
        }
        if p.fits:
            row.update(
                predicted_output_tokens_per_s=p.output_tokens_per_s,
                concurrency=p.concurrency,
                error=p.output_tokens_per_s / measured - 1,
            )
        out.append(row)
    return out


def compare_sglang(profile: Any = None, engine: str | None = None) -> dict[str, Any]:
    """The SGLang EP72 decode node: predicted against measured output tokens/s per node, with
    ``engine``'s kernels (None: TensorRT-LLM's, the planner's default; ``"sglang"``: planned as
    the user running SGLang would)."""
    s = SGLANG_EP72
    p = plan(
        s["model"],
        s["hardware"],
        s["gpus"],
        tp=s["tp"],
        ep=s["ep"],
        dp_attention=s["dp_attention"],
        redundant_experts=s["redundant_experts"],
        overlap=s["overlap"],
        # the decode pool's step at its batch and KV length (the capacity answer: a decode
        # pool at a fixed batch, no request mix; a disaggregated closed loop of osl=1 would
        # count the requests in prefill and transfer as not decoding)
        seq_len=s["kv_len"],
        batch=s["batch_per_gpu"] * s["gpus"],
        profile=profile,
        engine=engine,
    )
    per_node = p.decode_tokens_per_s / s["gpus"] * s["gpus_per_node"]
    return {
        "predicted_output_tokens_per_s_per_node": per_node,
        "measured_output_tokens_per_s_per_node": s["output_tokens_per_s_per_node"],
        "error": per_node / s["output_tokens_per_s_per_node"] - 1,
        "decode_step_s": p.decode_step_s,
        "step_comm_s": p.step_comm_s,
        "plan": p,
    }
