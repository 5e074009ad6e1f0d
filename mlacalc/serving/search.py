"""Search deployments: layouts x batch sizes x dtypes x aggregated/disaggregated.

For each GPU count, every layout that divides the model (tensor parallel within a scale-up
domain, a node or an NVL72 rack, data parallel beyond; pipeline stages, with expert
parallelism inside each for MoE models; expert parallel and DP-attention for MoE models, with
redundant experts where the GPU count does not divide the experts), each weight and KV
dtype, with and without two-batch overlap (MoE models), is evaluated at every batch size
that fits, in steady state at the given input and output lengths, the way
:func:`mlacalc.plan` evaluates one deployment (the decode steps of all batch sizes of a layout
in one vectorised call). Disaggregated points pair the decode pool with every prefill pool (of
the same GPU counts, both pools within the largest count, reported with the point) whose prompt
rate keeps up and that holds its weights and one prompt's cache, its passes capped at the
prompts whose cache fits beside the weights (as :func:`mlacalc.plan` checks a pool): per GPU
count, dtypes and overlap, every layout that no other beats on both prompts per second (at its
largest pass) and the time of a one-prompt pass ``t_pf[1]`` (the Pareto set: the most prompts
per second keeps up with the most decode, a shorter pass a shorter TTFT), each pairing a point.
As :func:`mlacalc.plan` has it, a prefill group runs passes of the size ``k`` that, of those
that keep up with its prompts (``k / t_pf[k] >=`` the prompts/s on it), gives the shortest
wait for the pass in progress (``rho t_pf[k] / 2``, ``rho`` the share of the time a pass runs)
and pass together; a prompt waits that, then its own pass, then the KV transfer (a point
equals ``plan`` of its deployment, prefill pool layout
included, at its concurrency). A disaggregated point is a decode batch; its concurrency is the
requests in flight that keep that many decoding: the batch plus, at its request rate, those in
the prefill pool and the KV transfer (Little's law), as ``plan``'s closed loop counts them.

The result has every point with its figures (output tokens/s per GPU and per user, TTFT,
TPOT), the Pareto frontier of tokens/s per GPU against tokens/s per user, the best point that
meets the latency targets (most tokens/s per GPU), and for the others why they lose: does not
fit, misses TTFT, misses TPOT, or is beaten on both axes by a frontier point.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlacalc.cost.engine import as_model
from mlacalc.hardware.catalogue import HardwareSpec, load_hardware
from mlacalc.models.loading import ModelConfig, load_model
from mlacalc.serving.capacity import PREFILL_TOKENS, pool_launch_share
from mlacalc.serving.figures import prompt_args
from mlacalc.serving.gpu_step import StepModel, routed_experts_class, spec_kernels
from mlacalc.serving.launch import checkpoint_path, deployments, launch_commands
from mlacalc.serving.layout import (
    Layout,
    kv_bytes_per_token_per_gpu,
    kv_heads_unsplit,
    kv_heads_words,
    make_layout,
    tp_splits_heads,
    weight_format,
)
from mlacalc.serving.plan import PREFILL_BUSY_WARN, prefill_busy_words
from mlacalc.serving.plan_checks import (
    check_balanced,
    check_engine_memory,
    check_int,
    check_number,
    check_routing_args,
    check_shared_prefix,
    dense_dp_attention,
    engine_runs_kv,
    format_warnings,
    indexer_copies,
    kv_head_copies,
    latent_copies,
    prefix_cached_tokens,
    refuse_without_ranks,
    requantized_words,
    trtllm_attention_tp,
    usable_of,
    with_own_w4a8,
)
from mlacalc.serving.precision import check_components
from mlacalc.serving.provenance import (
    SERVING_ERROR_SOURCE,
    SERVING_ERRORS,
    calibration_of,
    device_warnings,
    engine_profile_of,
    prediction_route,
    stand_in_parts,
    stand_in_warnings,
    with_stand_ins,
)
from mlacalc.serving.scheduler import (
    Scheduler,
    model_page_size,
    overlap_idle_note,
    unnamed_engine_note,
    with_engine_defaults,
)
from mlacalc.serving.search_command import (
    ROUTING_DEFAULTS,
    model_replay,
    plan_command,
    scheduler_words,
)
from mlacalc.serving.search_points import Points, evaluate, prefill_pools, settles
from mlacalc.serving.search_space import (
    NO_LIMITS,
    LayoutLimits,
    SearchRequest,
    candidate_layouts,
    candidates,
    fit_usable,
    layout_weights,
    per_sequence_bytes,
    time_candidates,
    weight_key,
)
from mlacalc.timemodel.mla_geometry import mla_geometry_note
from mlacalc.timemodel.moe_backend import check_moe_backend
from mlacalc.words import defaults as D
from mlacalc.words.arguments import MAX_BATCH, count, flag, one_or_many, prefix_hit, real, whole
from mlacalc.words.dtypes import (
    canonical_dtype,
    check_state_dtype,
    resolve_kv_layout,
    with_state_dtype,
)
from mlacalc.words.errors import InvalidArgumentError, MlacalcError, UnknownDtypeError
from mlacalc.words.units import counted
from mlacalc.words.vocab import stamped

__all__ = [
    "BATCHES",
    "CHUNKS",
    "PREFILL_TOKENS",
    "SearchRequest",
    "SearchResult",
    "search",
    "throughput_gpus",
]

#: Running sequences per attention group that the search tries (refined near the targets,
#: see :func:`refine`).
BATCHES = D.SEARCH_BATCHES
#: The largest GPU budget a search spends.
MAX_BUDGET = 4096
#: Chunked-prefill token budgets an aggregated point is also run at (SGLang's and vLLM's
#: default, 8,192, among them; :data:`mlacalc.serving.scheduler.ENGINE_DEFAULTS`).
CHUNKS = D.SEARCH_CHUNKS
#: Batches a search adds between the searched batches next to its best point's, on each side.
REFINE_POINTS = 12
#: Decode setups whose batches a search refines (the best point's and the runners-up's).
REFINE_SETUPS = 2
#: How far a setup's tokens/s per GPU may exceed those of a larger batch within a grid gap
#: (twice the batch), padded: tokens/s mostly rise with the batch but dip where a kernel's
#: rows cross a tile edge. Measured on searches run at every ~4% batch from 1 to 2,048 (the
#: largest fall of key(x) / key(y), x < y <= 2x, per setup): Qwen3-30B-A3B on 8 H200
#: 1.024 (TP8 tbo, 22 -> 23), DeepSeek-V3 on 8 H200 SGLang 1.009, Llama-3-8B on 1-2 H100
#: 1.061 (TP1, 206 -> 214); the review's 1-1.5% and Kimi-K2.6 GB200's 3.3% (12,000 -> 12,500
#: in flight, tests/test_serving_figures.py). Not a proof: a larger dip may refine too few.
DIP_MARGIN = 1.1
#: The most passes :func:`refine_below` makes below a setup's first searched batch (each
#: narrows the gap next to its best about (REFINE_POINTS + 1)-fold).
BELOW_PASSES = 5

#: The schema of :meth:`SearchResult.to_dict` (and ``mlacalc search --format json``)
SCHEMA = "mlacalc.search/1"
#: A point's ``request_latency_s`` per mode: aggregated, TTFT and the osl - 1 gaps after the
#: first token; disaggregated, the decode pool's osl steps after the KV transfer
LATENCY_FORMULAS = {
    "aggregated": "ttft_s + (osl - 1) * tpot_s",
    "disaggregated": "ttft_s + osl * tpot_s",
}

FIELDS = (
    "gpus",
    "decode_gpus",
    "prefill_gpus",
    "prefill_layout",
    "prefill_tp",
    "prefill_ep",
    "prefill_dp_attention",
    "prefill_redundant_experts",
    "mode",
    "layout",
    "tp",
    "dp",
    "pp",
    "ep",
    "redundant_experts",
    "dp_attention",
    "overlap",
    "weight_dtype",
    "weight_format",
    "component_dtypes",
    "kv_dtype",
    "chunked_prefill",
    "batch_per_group",
    "concurrency",
    "ttft_s",
    "tpot_s",
    "output_tokens_per_s",
    "output_tokens_per_s_per_gpu",
    "output_tokens_per_s_per_user",
    "requests_per_s",
    "request_latency_s",
    "replicas",
    "budget_gpus",
    "budget_output_tokens_per_s",
    "weights_per_gpu_bytes",
    "kv_per_gpu_bytes",
    "kv_per_token_bytes",
    "prefill_weights_per_gpu_bytes",
    "prefill_kv_per_prompt_bytes",
    "prefill_kv_per_token_bytes",
    "fits",
    "meets_targets",
    "on_frontier",
    "reason",
)


#: The keys of a point as :meth:`SearchResult.row` gives it (a CSV row's columns)
ROW_FIELDS = (*FIELDS, "profile", "calibration", "constraints")


def throughput_gpus(
    points: list[dict[str, Any]],
    best: dict[str, Any] | None,
    isl: int,
    osl: int,
    tokens_per_s: float,
    of: str = "output",
    point: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The GPUs a throughput target needs (a search's ``points`` and ``best``, its ``isl`` and
    ``osl``): whole replicas of ``point``'s layout, each serving the point's tokens/s under
    the search's targets; by default the point meeting the targets that needs the fewest GPUs
    (the best, of the most tokens/s per GPU, unless whole replicas of another come to fewer).
    ``tokens_per_s`` counts output tokens (``of="output"``) or prompt and output tokens
    together (``of="total"``: requests/s x (isl + osl)). Returns the target, what it
    counts, one replica's GPUs and tokens/s, the replicas, the GPUs and the tokens/s they
    serve (at least the target), and the point replicated."""
    if of not in ("output", "total"):
        raise InvalidArgumentError(
            "of", f"must be 'output' or 'total', got {of!r}: give of='output'"
        )
    if isinstance(tokens_per_s, bool) or not isinstance(tokens_per_s, (int, float)):
        raise InvalidArgumentError(
            "tokens_per_s",
            f"must be a number of tokens/s, got {type(tokens_per_s).__name__}: give "
            "tokens_per_s=50000",
        )
    if not math.isfinite(tokens_per_s) or tokens_per_s <= 0:
        raise InvalidArgumentError(
            "tokens_per_s",
            f"must be a positive finite number of tokens/s, got {tokens_per_s!r}: give "
            "tokens_per_s=50000",
        )
    tokens = osl if of == "output" else isl + osl

    def need(q: dict[str, Any], over: float = 0.0) -> tuple[int, float]:
        """The replicas of ``q`` and one's tokens/s, were each to serve ``1 / (1 + over)`` of
        its predicted tokens/s."""
        one = q["requests_per_s"] * tokens  # one replica's tokens/s of that kind
        return max(1, math.ceil(tokens_per_s * (1 + over) / one - 1e-9)), one

    if point is None:  # the fewest GPUs of any point meeting the targets (ties: the best,
        # then the most tokens/s: the replicas' headroom over the target)
        meeting = [q for q in points if q.get("meets_targets")]
        meeting = [q for q in meeting if q.get("engine_runs", True)] or meeting  # as the best
        if best is None or not meeting:
            raise InvalidArgumentError(
                "point", "no deployment meets the targets to replicate for the throughput"
            )
        point = min(
            [best, *meeting], key=lambda q: (need(q)[0] * q["gpus"], q is not best, -need(q)[1])
        )
    p = point
    replicas, one = need(p)
    largest = max(q["gpus"] for q in points)
    # the count were the replica's tokens/s as optimistic as the offline table's median row
    # (provenance.SERVING_ERRORS: a capacity analyst had no range on the answer)
    served = SERVING_ERRORS["offline_throughput"]["median"]
    return {
        "target_tokens_per_s": float(tokens_per_s),
        "of": of,
        "layout": p["layout"],
        "mode": p["mode"],
        "prefill_layout": p.get("prefill_layout"),
        "replica_gpus": p["gpus"],
        "replica_tokens_per_s": one,
        "replicas": replicas,
        "gpus": replicas * p["gpus"],
        "tokens_per_s": replicas * one,
        # the replica's own figures, as the text's note gives them
        "batch_per_group": p["batch_per_group"],
        "kv_dtype": p["kv_dtype"],
        "ttft_s": p["ttft_s"],
        "tpot_s": p["tpot_s"],
        "best_deployment": p is best,
        "note": _larger_replica_note(replicas, p["gpus"], largest),
        "gpus_at_served_error": need(p, served)[0] * p["gpus"],
        "served_error": served,
        "point": p,
    }


def _larger_replica_note(replicas: int, replica_gpus: int, largest: int) -> str:
    """Where the answer is several replicas of the largest GPU count searched: a replica of
    more GPUs, which the search did not time, may serve the target with fewer GPUs in all (a
    capacity analyst's Kimi-K2 on H100 needed 96 GPUs searching 16 and 32, 48 adding 64)."""
    if replicas <= 1 or replica_gpus < largest:
        return ""
    return (
        f"{replicas} replicas of {counted(replica_gpus, 'GPU')}, the largest count searched: "
        "the fewest GPUs among replicas of the counts searched; a replica of more GPUs "
        "(tokens/s per GPU often grows with it) may need fewer in all: add larger counts to "
        f"the search (--gpus {replica_gpus},{2 * replica_gpus},{4 * replica_gpus})"
    )


@dataclass(frozen=True)
class SearchResult:
    """Every evaluated deployment, the Pareto frontier, the best one meeting the targets."""

    model: str
    hardware: str
    isl: int
    osl: int
    ttft_target_s: float | None
    tpot_target_s: float | None
    points: list[dict[str, Any]]
    frontier: list[dict[str, Any]]
    best: dict[str, Any] | None
    reasons: dict[str, int]
    layouts: int
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())
    #: the engine of the aggregated points (see :func:`search`)
    prefill_pass: str = "fused"
    output_lag_steps: int = 0
    #: candidates never timed, by reason (does not fit, no prefill pool, no network figures);
    #: ``reasons`` holds these and the timed points' reasons together
    ruled_out: dict[str, int] = field(default_factory=dict)
    #: the calibration profile that timed the kernels, and how the device was predicted with
    #: it (as :attr:`mlacalc.Plan.calibration` says it)
    profile: str = ""
    calibration: str = ""
    #: the memory options the points were sized with (a plan of a point needs the same)
    memory_reserve: float = 0.1
    page_size: int = 16
    #: the engine's own memory setting the points were sized by (None: memory_reserve's;
    #: plan's ``engine_memory``, read by the meaning of :attr:`engine_memory_of`)
    engine_memory: float | None = None
    engine_memory_of: str | None = None
    #: the dtype a linear or Mamba layer's recurrent state was kept in (None: float32)
    state_dtype: str | None = None
    #: how the best point's own kernels were predicted (its decode step and its prompts'
    #: prefill, as :attr:`mlacalc.Plan.calibration` of its plan says it)
    best_calibration: str = ""
    #: the serving engine whose kernels were timed (trtllm, sglang, vllm)
    engine: str = "trtllm"
    #: the GPU budget the search spent (None: the GPU counts were given one by one)
    budget: int | None = None
    #: the model's routed experts (a launch command's load balancer counts their slots)
    routed_experts: int = 0
    #: what the search warns of as data (the input read otherwise, kernels standing in, an
    #: MLA geometry no measured kernel row has: :func:`~mlacalc.timemodel.predict.
    #: mla_geometry_note`)
    warnings: tuple[str, ...] = field(default=())
    #: with ``served_bias``: the targets as given, to be met served (``ttft_target_s`` and
    #: ``tpot_target_s`` are then the predictions that meet them at the measured median bias)
    served_targets: dict[str, float | None] | None = None
    #: the engine whose scheduler defaults filled the arguments left out (None: none), and
    #: each argument it filled with its value, as :attr:`mlacalc.Plan.scheduler_defaults`
    #: (a plan of a point given these runs it as the search did)
    scheduler_defaults: str | None = None
    scheduler_defaults_applied: dict[str, Any] = field(default_factory=dict)
    #: where no engine was named and no engine's defaults taken: the default engine, its
    #: kernels timed but not its scheduler defaults, and what naming it sets (plan's words,
    #: :attr:`mlacalc.Plan.default_engine_note`); "" otherwise
    default_engine_note: str = ""
    #: what the search was limited to (:meth:`constraints`): the layouts allowed and how the
    #: routing loads the experts of every point with routed experts
    limits: LayoutLimits = NO_LIMITS
    prefill_limits: LayoutLimits | None = None
    routing: dict[str, Any] = field(default_factory=lambda: dict(ROUTING_DEFAULTS))
    #: prefix caching: the share of each prompt's tokens found cached in every point (plan's
    #: ``prefix_cache_hit``; 0: none)
    prefix_cache_hit: float = 0.0
    #: a shared prefix: the tokens every prompt begins with alike in every point (plan's
    #: ``shared_prefix``; 0: none), its pages held once per attention group
    shared_prefix: int = 0
    #: the ``mlacalc plan`` command line that gives the best point's figures, as ``mlacalc
    #: search --format json`` says it (:func:`~mlacalc.serving.search_command.plan_command`):
    #: the model as given where named by a name or path, a changed shipped model as its name
    #: and ``--set`` of the fields changed (:func:`~mlacalc.serving.search_command.
    #: model_replay`), a config read from a file as the file's path; None where there is no
    #: best or the model is a config no command names (built in code, or a file's config
    #: changed after reading); the CLI writes the model, device and profile as typed and its
    #: ``--set``
    plan_command: str | None = None
    #: how the points' kernel times were predicted on this device under this engine, with the
    #: error to expect: :attr:`mlacalc.Plan.prediction` of the best point's plan (the same for
    #: every point: the route depends on the device, the engine and the model only)
    prediction: dict[str, Any] = field(default_factory=dict)

    def constraints(self) -> dict[str, Any]:
        """The layouts searched and the routing every point was timed with, as JSON data
        (every key always present: ``tp``, ``pp``, ``ep``, ``dp_attention``,
        ``redundant_experts``, ``routing``, ``expert_skew``, ``rebalance``,
        ``routing_imbalance``, ``moe_backend``, ``prefix_cache_hit``;
        :class:`~mlacalc.serving.search_space.LayoutLimits`)."""
        prefill = (self.prefill_limits or self.limits).to_dict()
        prefill.pop("pp")  # a prefill pool runs one stage
        return {
            **self.limits.to_dict(),
            **{f"prefill_{k}": v for k, v in prefill.items()},
            **self.routing,
            "prefix_cache_hit": self.prefix_cache_hit,
            **({"shared_prefix": self.shared_prefix} if self.shared_prefix else {}),
        }

    def constraints_text(self) -> str:
        """The constraints given, as the command line writes them (``--tp 8 --ep 8
        --routing balanced``; ``""``: none)."""
        words = [f"{k} {v}" for k, v in self.limits.options().items()]
        if self.prefill_limits is not None:  # the prefill pool's, where not the decode's
            mine, theirs = self.limits.options(), self.prefill_limits.options()
            unset = {"--ep": "any", "--dp-attention": "both", "--redundant-experts": "auto"}
            for flag in ("--tp", "--ep", "--dp-attention", "--redundant-experts"):
                value = theirs.get(flag, unset.get(flag, "any"))
                if value != mine.get(flag, unset.get(flag, "any")):
                    words.append(f"--prefill-{flag[2:]} {value}")
        for name, value in self.routing.items():
            if value != ROUTING_DEFAULTS[name]:
                flag = "--" + name.replace("_", "-")
                if name == "rebalance":
                    words.append(flag if value else "--no-rebalance")
                elif isinstance(value, str):  # --routing, --moe-backend
                    words.append(f"{flag} {value}")
                else:
                    words.append(f"{flag} {value:g}")
        if self.prefix_cache_hit:  # as written: plan reads the decimal (prefix_cached_tokens)
            words.append(f"--prefix-cache-hit {self.prefix_cache_hit!r}")
        if self.shared_prefix:
            words.append(f"--shared-prefix {self.shared_prefix}")
        return " ".join(words)

    @property
    def point_reasons(self) -> dict[str, int]:
        """The timed points by reason, each counted once under its first reason (misses
        TTFT, then misses TPOT, then on the frontier or beaten); they sum to the points."""
        out: dict[str, int] = {}
        for p in self.points:
            key = p["reason"].split(",")[0]
            out[key] = out.get(key, 0) + 1
        return out

    @property
    def missing_both(self) -> int:
        """Timed points missing both latency targets (counted under "misses TTFT")."""
        return sum(p["reason"] == "misses TTFT, misses TPOT" for p in self.points)

    @property
    def points_missing_both_targets(self) -> int:
        """:attr:`missing_both` under its name in :meth:`to_dict` and the docs."""
        return self.missing_both

    def to_dict(self, *, wall_time: bool = True, all_points: bool = False) -> dict[str, Any]:
        """The result as JSON data (``schema`` :data:`SCHEMA`): ``best`` and each of
        ``frontier`` as :meth:`row` (every point the same keys, with its profile and
        calibration); the fields are documented in docs/serving.md ("Search output"); the tool's
        version after the schema and, where a profile timed it, its ``profile_digest``.
        ``seconds`` (the search's wall time) is its one key that differs run to run:
        ``wall_time=False`` leaves it out, the rest byte-identical for the same call. ``points``
        is the number of points timed; with ``all_points`` (``mlacalc search --all``), every
        point's record instead (:meth:`rows`: :attr:`points` as :meth:`row` gives each)."""
        doc = {
            "schema": SCHEMA,
            "model": self.model,
            "hardware": self.hardware,
            "isl": self.isl,
            "osl": self.osl,
            # plan's keys, same meaning: the hit and a prompt's tokens found cached
            "prefix_cache_hit": self.prefix_cache_hit,
            "prefix_cached_tokens": prefix_cached_tokens(
                self.prefix_cache_hit, self.isl, self.page_size, self.shared_prefix
            ),
            # plan's key: the tokens every prompt begins with alike (none: not a key)
            **({"shared_prefix": self.shared_prefix} if self.shared_prefix else {}),
            "ttft_target_s": self.ttft_target_s,
            "tpot_target_s": self.tpot_target_s,
            "served_targets": self.served_targets,
            "best": self.row(self.best) if self.best else None,
            "frontier": [self.row(p) for p in self.frontier],
            "request_latency_s": dict(LATENCY_FORMULAS),
            "reasons": dict(self.reasons),
            "point_reasons": self.point_reasons,
            "ruled_out": dict(self.ruled_out),
            "points_missing_both_targets": self.missing_both,
            "layouts": self.layouts,
            "points": len(self.points),
            "seconds": self.seconds,
            "notes": list(self.notes),
            "warnings": list(self.warnings),
            "prefill_pass": self.prefill_pass,
            "output_lag_steps": self.output_lag_steps,
            "engine": self.engine,
            "profile": self.profile,
            "calibration": self.calibration,
            "best_calibration": self.best_calibration,
            "memory_reserve": self.memory_reserve,
            "page_size": self.page_size,
            "engine_memory": self.engine_memory,
            "state_dtype": self.state_dtype,
            "budget": self.budget,
            "scheduler_defaults": self.scheduler_defaults,
            "scheduler_defaults_applied": dict(self.scheduler_defaults_applied),
            "default_engine_note": self.default_engine_note,
            "constraints": self.constraints(),
            "plan_command": self.plan_command,
            "prediction": dict(self.prediction),
        }
        if not wall_time:
            del doc["seconds"]
        if all_points:
            doc["points"] = self.rows()
        return stamped(doc, (self.prediction.get("profile") or {}).get("digest"))

    def row(self, p: dict[str, Any]) -> dict[str, Any]:
        """One point as a flat record, with the profile that timed it and the constraints
        searched under (:meth:`constraints_text`, ``""``: none)."""
        return {
            **{k: p.get(k) for k in FIELDS},
            "profile": self.profile,
            "calibration": self.calibration,
            "constraints": self.constraints_text(),
        }

    def rows(self) -> list[dict[str, Any]]:
        """Every point as a flat record (for CSV and notebooks)."""
        return [self.row(p) for p in self.points]

    def launch_share(self, engine: str, p: dict[str, Any], pool: str = "decode") -> float | None:
        """The memory setting ``engine``'s launch lines give point ``p``'s ``pool`` (``"decode"``:
        the decode pool, the only one aggregated; ``"prefill"``: a disaggregated point's prefill
        pool, by its own weights and prompt): read back, it holds as many of the point's KV
        tokens and sequences (prompts) per GPU, the share plan of the point gives
        (:func:`mlacalc.serving.capacity.pool_launch_share`, both routes'). Sized by the
        engine's own setting: :func:`mlacalc.serving.capacity.engine_share`; by the reserve:
        :func:`mlacalc.serving.capacity.reserve_share` (None under vLLM and SGLang, whose
        setting is the launch's ``1 - memory_reserve``)."""
        memory = load_hardware(self.hardware).memory_bytes
        shared = p.get("kv_shared_prefix_bytes", 0)  # held once per group
        per_seq = (p["kv_per_gpu_bytes"] - shared) // max(int(p["batch_per_group"]), 1)
        units = (p["kv_per_token_bytes"], per_seq)
        weights = p["weights_per_gpu_bytes"]
        if pool == "prefill":  # its own weights (TensorRT-LLM's share is of what they leave)
            units = (p["prefill_kv_per_token_bytes"], p["prefill_kv_per_prompt_bytes"])
            weights = p["prefill_weights_per_gpu_bytes"]
        em = None if self.engine_memory is None else (self.engine_memory_of, self.engine_memory)
        usable = usable_of(memory, weights, self.memory_reserve)
        return pool_launch_share(engine, memory, weights, units, em, usable)

    def gpus_for(
        self, tokens_per_s: float, of: str = "output", point: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The GPUs ``tokens_per_s`` needs in whole replicas of a point meeting the targets
        (the fewest; ``of`` ``"output"`` or ``"total"``): :func:`throughput_gpus`."""
        return throughput_gpus(
            self.points, self.best, self.isl, self.osl, tokens_per_s, of=of, point=point
        )

    def launch_commands(
        self, engine: str, model_path: str | None = None, point: dict[str, Any] | None = None
    ) -> list[tuple[str, str]]:
        """``(what, command)`` that start ``point`` (the best by default) on ``engine``
        (``"sglang"``, ``"vllm"``, ``"trtllm"``; :mod:`mlacalc.serving.launch`), loading
        ``model_path`` (by default a shipped model's Hugging Face repository as its sources
        name it, :func:`~mlacalc.serving.launch.checkpoint_path`, else the model's name)."""
        p = point if point is not None else self.best
        if p is None:
            raise InvalidArgumentError("point", "no deployment meets the targets to launch")
        pools = deployments(
            p,
            load_hardware(self.hardware).gpus_per_node,
            self.memory_reserve,
            max(1, PREFILL_TOKENS // self.isl),
            chunked_prefill=p.get("chunked_prefill"),
            routed_experts=self.routed_experts,
            page_size=self.page_size,  # the page the search assumed, said to the engine
            memory_fraction=self.launch_share(engine, p),
            prefill_memory_fraction=self.launch_share(engine, p, "prefill")
            if p["prefill_gpus"]
            else None,
            moe_backend=p.get("moe_backend"),  # TensorRT-LLM's, where the point's experts take it
        )
        if model_path is None:
            try:
                model_path = checkpoint_path(load_model(self.model))[0]
            except MlacalcError:  # not a shipped name (a file's, a changed model's)
                model_path = self.model
            if model_path.startswith("<"):
                model_path = self.model
        return launch_commands(engine, model_path, pools)


def budget_counts(budget: int, unit: int = 1) -> tuple[int, ...]:
    """The pool sizes a budget of ``budget`` GPUs is split into: every multiple of ``unit``
    (the fewest GPUs any layout of the model fits on), every power of two from ``unit`` and
    the budget itself (a decode pool and a prefill pool within the budget, each of these
    sizes; a deployment smaller than the budget is replicated)."""
    unit = max(1, min(unit, budget))
    counts = set(range(unit, budget + 1, unit)) | {budget}
    c = 1
    while c < budget:
        if c >= unit:
            counts.add(c)
        c *= 2
    return tuple(sorted(counts))


def tight_counts(budget: int, counts: tuple[int, ...]) -> tuple[int, ...]:
    """Of ``counts``, the sizes worth running aggregated: per number of replicas ``r``, the
    largest count within ``budget // r``. A smaller count giving the same replicas leaves
    GPUs of the budget idle that the larger one serves with (decode pools and prefill pools
    take every count)."""
    out = set()
    for r in range(1, budget // counts[0] + 1):
        fit = [c for c in counts if c <= budget // r]
        if fit:
            out.add(max(fit))
    return tuple(sorted(out))


def node_unit(fit: int, node: int) -> int:
    """The pool unit of a model that fits on ``fit`` GPUs, on nodes of ``node``: the
    smallest divisor of the node (or multiple of it) of at least ``fit`` GPUs, so that pools
    of multiples of it tile whole nodes (six GPUs on eight-GPU nodes strand two that cannot
    hold the weights: the unit is eight)."""
    if fit >= node:
        return -(-fit // node) * node
    return min(d for d in range(fit, node + 1) if node % d == 0)


def smallest_fit(
    m: ModelConfig,
    hw: HardwareSpec,
    budget: int,
    weight_dtypes: tuple[str, ...],
    own: bool,
    usable: int,
    components: tuple[tuple[tuple[str, str], ...], ...],
    cache: dict | None = None,
    limits: LayoutLimits = NO_LIMITS,
    prefill: LayoutLimits | None = None,
) -> int:
    """The fewest GPUs (within ``budget``) on which some layout holds the weights in some
    searched weight choice (``budget``: none does; the search then says so)."""
    for g in range(1, budget + 1):
        for w in weight_dtypes:
            sized = None if own and w == m.weights_dtype else w
            for comps in components:
                if candidate_layouts(m, hw, g, sized, usable, comps, cache, limits, None, prefill):
                    return g
    return budget


def budget_pools(
    fit: tuple, limits: LayoutLimits, pf_limits: LayoutLimits | None
) -> tuple[int, ...]:
    """The pool sizes a budget search runs: those a layout within the limits fits on
    (``fit``: :func:`smallest_fit`'s arguments up to its limits, the budget third). Each
    degree given is checked first against what the budget is split into, one list whatever
    the limits (before, each limit's own split: "8" for --tp 16, where nothing fits within
    the limit, "4, 8" for --ep 3), then against the pools searched."""
    hw, budget = fit[1], fit[2]

    def pools(*limited: Any) -> tuple[int, ...]:
        unit = node_unit(smallest_fit(*fit, *limited), hw.gpus_per_node or 1)
        return budget_counts(budget, unit)

    split = pools()
    given = [(lim, pre) for lim, pre in ((limits, ""), (pf_limits, "prefill_")) if lim is not None]
    for lim, prefix in given:
        _check_limits_divide(lim, split, budget, prefix)
    if limits == NO_LIMITS and pf_limits is None:
        return split
    gpus = pools(limits, pf_limits)
    for lim, prefix in given:
        _check_limits_divide(lim, gpus, budget, prefix, split)
    return gpus


def _lists(
    gpus: Any, kv_dtypes: Any, modes: Any, overlaps: Any, weight_dtypes: Any, batches: Any
) -> tuple[Any, ...]:
    """:func:`check_search`'s list-valued options, each a tuple (one value a list of one; an
    empty list refused, naming it); ``weight_dtypes`` None stays None (the model's own)."""
    gpus = one_or_many("gpus", gpus, what="GPU counts")
    kv_dtypes = one_or_many("kv_dtypes", kv_dtypes, what="KV dtypes")
    modes = one_or_many("modes", modes, what="modes (aggregated, disaggregated)")
    overlaps = one_or_many("overlaps", overlaps, what="overlaps (none, tbo)")
    if weight_dtypes is not None:
        weight_dtypes = one_or_many("weight_dtypes", weight_dtypes, what="weight dtypes")
    batches = tuple(
        count("batches", b, MAX_BATCH) for b in one_or_many("batches", batches, what="batch sizes")
    )
    return gpus, kv_dtypes, modes, overlaps, weight_dtypes, batches


def _scheduler_request(
    m: ModelConfig,
    hw: HardwareSpec,
    engine: str | None,
    engine_name: str,
    engine_defaults: str | None,
    asked: tuple[Any, ...],
    stand_in: str | None = None,
) -> tuple[Any, ...]:
    """The scheduler's values a search runs under: those ``asked`` (max_running, max_tokens,
    the scheduler, the overlap and the page) with the engine's defaults where left out (as
    :func:`mlacalc.plan` fills them), the record of what was taken, and, where no engine was
    named and none's defaults taken, plan's note on the default engine
    (:func:`~mlacalc.serving.scheduler.unnamed_engine_note`; ``stand_in``: the engine whose
    kernels stand in for the default's, where another's do)."""
    max_running, max_tokens, scheduler, overlap_schedule, page_size = asked
    scheduler_given = _check_scheduler(scheduler)
    max_running, max_tokens, scheduler, record = scheduler_of(
        engine, engine_defaults, max_running, max_tokens, scheduler, overlap_schedule
    )
    given = {
        "max_running": max_running,
        "max_tokens": max_tokens,
        "overlap_schedule": scheduler.overlap,  # on where none was given, as plan's
        "cuda_graph_max_batch": scheduler_given and scheduler_given.cuda_graph_max_batch,
        "page_size": page_size,
    }
    if page_size is None:  # the page of the engine whose defaults were taken, as plan's
        page_size = model_page_size(record["scheduler_defaults"], m, hw)
    if engine is None and record["scheduler_defaults"] is None:  # plan's words, plan's rule
        record["default_engine_note"] = unnamed_engine_note(
            engine_name, given, m, hw, page_size, chunked=False, kernels_of=stand_in
        )
    return max_running, max_tokens, scheduler, record, page_size


def check_search(
    model: ModelConfig | str,
    hardware: HardwareSpec | str,
    gpus: Any,
    *,
    isl: Any,
    osl: Any,
    ttft: Any,
    tpot: Any,
    weight_dtypes: Any,
    kv_dtypes: Any,
    modes: Any,
    overlaps: Any,
    batches: Any,
    memory_reserve: Any,
    page_size: Any,
    prefill_pass: Any,
    output_lag_steps: Any,
    profile: Any,
    max_running: Any = None,
    max_tokens: Any = None,
    scheduler: Any = None,
    engine: Any = None,
    component_choices: Any = None,
    chunked_prefills: Any = None,
    overlap_schedule: Any = None,
    engine_defaults: Any = None,
    tp: Any = None,
    pp: Any = None,
    ep: Any = "any",
    dp_attention: Any = "both",
    redundant_experts: Any = None,
    routing: Any = "random",
    expert_skew: Any = 0.0,
    rebalance: Any = None,
    routing_imbalance: Any = 1.0,
    prefill_tp: Any = None,
    prefill_ep: Any = None,
    prefill_dp_attention: Any = None,
    prefill_redundant_experts: Any = None,
    prefix_cache_hit: Any = 0.0,
    shared_prefix: Any = 0,
    engine_memory: Any = None,
    moe_backend: Any = None,
    state_dtype: Any = None,
) -> SearchRequest:
    """Every argument of :func:`search` checked (the first wrong one refused, naming it) and
    normalised; no weight dtypes: the model's own and, for 16-bit weights on a device with
    fp8 tensor cores, fp8."""
    m = as_model(model)
    hw = load_hardware(hardware)
    # one value of a list-valued option (a str: one dtype) is a list of one; none is refused
    budget = None
    if whole(gpus) is not None:
        # one number: a budget, split between pools and replicas
        budget = count("gpus", gpus, MAX_BUDGET)
        gpus = (budget,)  # split below, once the weight choices are known
    gpus, kv_dtypes, modes, overlaps, weight_dtypes, batches = _lists(
        gpus, kv_dtypes, modes, overlaps, weight_dtypes, batches
    )
    gpus, isl, osl, ttft, tpot = _check_values(gpus, isl, osl, ttft, tpot, modes, overlaps)
    prefix = _prefix_args(prefix_cache_hit, shared_prefix, isl)  # plan's checks
    if not m.is_moe:  # two-batch overlap is for routed experts: plan refuses it here
        if overlaps == ("tbo",):
            raise InvalidArgumentError(
                "overlaps",
                f"{m.label} has no routed experts: two-batch overlap hides the experts' "
                "all-to-all, which the engines run for MoE models only; use none",
            )
        overlaps = tuple(o for o in overlaps if o != "tbo")
    memory = {"memory_reserve": memory_reserve, "engine_memory": engine_memory, "engine": engine}
    check_engine_memory(memory, hw)  # plan's rule: the engine's setting or the reserve, not both
    engine_memory = memory["engine_memory"]
    output_lag_steps, memory_reserve = _check_engine(
        prefill_pass, output_lag_steps, memory["memory_reserve"], modes
    )
    # checked before arithmetic, as plan checks them (a page of 0 or a reserve of None was
    # a raw ZeroDivisionError or TypeError)
    page_size = check_int("page_size", page_size, allow_none=True)
    _check_dtypes(weight_dtypes or (), kv_dtypes)
    own = weight_dtypes is None  # the model's own weights are sized as its checkpoint stores them
    if weight_dtypes is None:
        weight_dtypes = (m.weights_dtype,)
        if canonical_dtype(m.weights_dtype) in ("bf16", "fp16") and "fp8" in hw.peak_flops_per_s:
            weight_dtypes += ("fp8",)

    components = _check_component_choices(component_choices, m)
    limits = check_limits(m, tp, pp, ep, dp_attention, redundant_experts)
    prefill = (prefill_tp, prefill_ep, prefill_dp_attention, prefill_redundant_experts)
    pf_limits = prefill_limits(m, limits, modes, **dict(zip(PREFILL_LIMITS, prefill)))
    moe = dict(zip(ROUTING_DEFAULTS, (routing, expert_skew, rebalance, routing_imbalance)))
    moe = _check_moe_options(m, limits, pf_limits, moe)
    tight, cache = None, {}  # cache: each layout's weights, counted once (layout_weights)
    if budget is not None:
        usable = fit_usable(hw.memory_bytes, memory_reserve, engine_memory)
        fit = (m, hw, budget, tuple(weight_dtypes), own, usable, components, cache)
        gpus = budget_pools(fit, limits, pf_limits)
        tight = tight_counts(budget, gpus)
    else:
        _check_limits_divide(limits, gpus)
        if pf_limits is not None:
            _check_limits_divide(pf_limits, gpus, None, "prefill_")
    prof, engine_name, engine_note = engine_profile_of(profile, engine, hw)  # none: the engine's
    weights = [None] if own else list(weight_dtypes)
    components = with_own_w4a8(m, hw, prof, components)  # choice added before moe_backend's check
    moe["moe_backend"] = _check_backend(moe_backend, m, hw, engine_name, weights, components)
    max_running, max_tokens, scheduler, record, page_size = _scheduler_request(
        m, hw, engine, engine_name, engine_defaults,
        (max_running, max_tokens, scheduler, overlap_schedule, page_size),
        prof.engine if engine_note else None,
    )  # fmt: skip
    return SearchRequest(
        m=m,
        hw=hw,
        gpus=gpus,
        isl=isl,
        osl=osl,
        ttft=ttft,
        tpot=tpot,
        weight_dtypes=tuple(weight_dtypes),
        own=own,
        kv_dtypes=kv_dtypes,
        modes=modes,
        overlaps=overlaps,
        batches=batches,
        memory_reserve=memory_reserve,
        page_size=page_size,
        prefill_pass=prefill_pass,
        output_lag_steps=output_lag_steps,
        profile=prof,
        engine=engine_name,
        engine_note=engine_note,
        named=(engine and engine_name, profile),
        replay=model_replay(model, m),
        budget=budget,
        max_running=None if max_running is None else count("max_running", max_running, MAX_BATCH),
        max_tokens=None if max_tokens is None else count("max_tokens", max_tokens, 1 << 30),
        scheduler=scheduler,
        scheduler_record=record,
        components=components,
        whole_gpus=tight,
        weight_cache=cache,
        chunks=_check_chunks(chunked_prefills),
        limits=limits,
        prefill_limits=pf_limits,
        routing=tuple(moe.items()),
        **prefix,
        engine_memory=engine_memory,
        state_dtype=_state_dtype(state_dtype),
    )


def _prefix_args(prefix_cache_hit: Any, shared_prefix: Any, isl: int) -> dict[str, Any]:
    """The prompts' prefix caching, checked as plan checks it: the hit, the shared prefix."""
    return {
        "prefix_cache_hit": prefix_hit("prefix_cache_hit", prefix_cache_hit),
        "shared_prefix": check_shared_prefix(shared_prefix, isl),
    }


def _state_dtype(value: Any) -> str | None:
    """``state_dtype`` checked (refused as plan refuses it) and named; None: float32."""
    return None if value is None else check_state_dtype(value)


#: The words of ``dp_attention`` (the CLI's ``--dp-attention``), Python's bools and None too
_DP_ATTENTION = {"both": "both", "on": "on", "off": "off", None: "both", True: "on", False: "off"}


def _heads_words(m: ModelConfig, t: int) -> str:
    """Why ``t`` ranks cannot split ``m``'s heads: its attention heads, and its linear
    attention's key and value heads where it has linear attention."""
    n_kv = kv_heads_unsplit(m, t)
    if n_kv and m.num_attention_heads % t == 0:
        return kv_heads_words(m, t, n_kv)
    linear = [(k, getattr(m, f"linear_num_{k}_heads", None)) for k in ("key", "value")]
    said = " and ".join(f"{h} {k}" for k, h in linear if h)
    return (
        f"{t} does not divide the {m.num_attention_heads} attention heads of {m.label}"
        + (f" (and the {said} heads of its linear attention)" if said else "")
        + "; give a divisor of them"
    )


def check_limits(
    m: ModelConfig,
    tp: Any,
    pp: Any,
    ep: Any,
    dp_attention: Any,
    redundant_experts: Any,
    prefix: str = "",
) -> LayoutLimits:
    """The layouts a search may try, each limit checked against the model (the GPU counts
    are :func:`_check_limits_divide`'s): ``tp`` and ``pp`` None or degrees, ``ep`` ``"any"``,
    ``"none"`` or degrees, ``dp_attention`` ``"both"``, ``"on"`` or ``"off"`` (or None, True,
    False), ``redundant_experts`` None (``"auto"``) or a count; ``prefix`` ``"prefill_"``: a
    prefill pool's (each error names its argument so, and its flag)."""
    name = {k: prefix + k for k in ("tp", "pp", "ep", "dp_attention", "redundant_experts")}
    flag = {k: "--" + v.replace("_", "-") for k, v in name.items()}
    tps = _degrees(name["tp"], tp)
    pps = _degrees(name["pp"], pp)
    for t in tps or ():
        if not tp_splits_heads(m, t):
            raise InvalidArgumentError(name["tp"], _heads_words(m, t))
    for p in pps or ():
        if p > m.num_hidden_layers:
            raise InvalidArgumentError(
                name["pp"], f"{p} stages exceed the {m.num_hidden_layers} layers of {m.label}"
            )
    eps = ep if ep in ("any", "none") else _degrees(name["ep"], ep, words="any, none or ")
    if eps is None:
        eps = "any"
    typed = None  # what was given, where it reads otherwise (said in messages and words)
    if isinstance(eps, tuple) and set(eps) == {1}:
        eps, typed = "none", ",".join(map(str, eps))  # no expert parallelism, as the word says
    if not m.is_moe and eps != "none" and ep != "any":
        raise InvalidArgumentError(
            name["ep"], f"{m.label} has no routed experts to spread; give 'none' or leave it out"
        )
    try:
        dpa = _DP_ATTENTION[dp_attention]
    except (KeyError, TypeError):
        raise InvalidArgumentError(
            name["dp_attention"], f"must be one of both, on, off, got {dp_attention!r}"
        ) from None
    if dpa == "on" and not m.is_moe:
        raise InvalidArgumentError(
            name["dp_attention"],
            dense_dp_attention(
                m,
                f"give 'off' or leave it out: use {name['tp']} ({flag['tp']}), or dp replicas "
                "where the whole model fits one GPU",
            ),
        )
    red = None if redundant_experts in (None, "auto") else redundant_experts
    red = check_int(name["redundant_experts"], red, minimum=0)
    if red and not m.is_moe:
        raise InvalidArgumentError(
            name["redundant_experts"], f"{m.label} has no experts to replicate; leave it out"
        )
    if red and eps == "none":
        raise InvalidArgumentError(
            name["redundant_experts"],
            f"{red} replicas of busy experts (EPLB) spread the load over expert-parallel ranks, "
            f"but {name['ep']} is none ({flag['ep']} {typed or 'none'}): no layout searched "
            "has any; give "
            f"'any' or degrees above 1 ({flag['ep']}), or leave {name['redundant_experts']} "
            f"({flag['redundant_experts']}) out",
        )
    if red is not None and isinstance(eps, tuple):
        for e in eps:
            if e > 1 and (m.n_routed_experts + red) % e:
                fix = red + (-(m.n_routed_experts + red)) % e
                raise InvalidArgumentError(
                    name["ep"],
                    f"{e} does not divide the {m.n_routed_experts} routed experts of {m.label} "
                    f"+ {red} redundant; give {name['redundant_experts']} {fix} "
                    f"({flag['redundant_experts']} {fix}), or leave it out (auto: the fewest "
                    "that round the slots up)",
                )
    return LayoutLimits(tps, pps, eps, dpa, red, ep_words=typed)


#: The arguments that limit a disaggregated prefill pool's layouts apart (prefill_limits)
PREFILL_LIMITS = (
    "prefill_tp",
    "prefill_ep",
    "prefill_dp_attention",
    "prefill_redundant_experts",
)


def prefill_limits(
    m: ModelConfig, limits: LayoutLimits, modes: tuple[str, ...], **given: Any
) -> LayoutLimits | None:
    """A disaggregated prefill pool's layout limits: each of ``given`` (``prefill_tp``,
    ``prefill_ep``, ``prefill_dp_attention``, ``prefill_redundant_experts``; None: not given)
    checked, the decode pool's limit where not given; no stage limit (a prefill pool runs one
    stage). None: the decode pool's limits, as they are (or no disaggregated mode)."""
    asked = [k for k, v in given.items() if v is not None]
    if asked and "disaggregated" not in modes:
        raise InvalidArgumentError(
            asked[0],
            f"limits a disaggregated prefill pool, but modes are {', '.join(modes)}: add "
            "disaggregated (--modes aggregated,disaggregated) or leave it out",
        )
    if not (asked or limits.pp) or "disaggregated" not in modes:
        return None
    args = {k: given[f"prefill_{k}"] for k in ("tp", "ep", "dp_attention", "redundant_experts")}
    out = check_limits(
        m,
        limits.tp if args["tp"] is None else args["tp"],
        None,
        limits.ep if args["ep"] is None else args["ep"],
        limits.dp_attention if args["dp_attention"] is None else args["dp_attention"],
        limits.redundant_experts
        if args["redundant_experts"] is None
        else args["redundant_experts"],
        prefix="prefill_",
    )
    if args["ep"] is None:  # the decode pool's, in its words
        out = dataclasses.replace(out, ep_words=limits.ep_words)
    return None if out == limits else out


def _degrees(name: str, value: Any, words: str = "") -> tuple[int, ...] | None:
    """A list of parallel degrees (None: not limited), each a positive integer, sorted."""
    if value is None:
        return None
    if isinstance(value, str):
        raise InvalidArgumentError(
            name, f"must be {words}a list of positive integers (e.g. 8 or 4,8), got {value!r}"
        )
    items = one_or_many(name, value, what="parallel degrees")
    return tuple(sorted({count(name, v, MAX_BUDGET) for v in items}))


def _check_limits_divide(
    limits: LayoutLimits,
    gpus: tuple[int, ...],
    budget: int | None = None,
    prefix: str = "",
    split: tuple[int, ...] | None = None,
) -> None:
    """Each degree given divides one of the GPU counts searched at least (under a budget,
    its pool sizes, or where ``split`` (the budget's pool sizes) is given, those of them a
    layout within the limits fits on); a degree dividing none is a mistake, not a
    constraint."""
    counts = ", ".join(str(g) for g in sorted(gpus))
    if budget is not None:
        counts = f"the pool sizes of the {budget}-GPU budget: {counts}"
        if split is not None and split != gpus:
            every = ", ".join(str(g) for g in split)
            counts = (
                f"the {budget}-GPU budget's pools that a layout within the limits fits on: "
                f"{', '.join(str(g) for g in sorted(gpus))}, of its pool sizes {every}"
            )
    for name, degrees in (("tp", limits.tp), ("pp", limits.pp), ("ep", limits.ep)):
        for d in degrees if isinstance(degrees, tuple) else ():
            if not any(g % d == 0 for g in gpus):
                raise InvalidArgumentError(
                    prefix + name,
                    f"{d} divides none of the GPU counts searched ({counts}); give a degree "
                    "that divides one of them, or more GPUs (--gpus)",
                )


def _check_moe_options(
    m: ModelConfig, limits: LayoutLimits, prefill: LayoutLimits | None, moe: dict[str, Any]
) -> dict[str, Any]:
    """How the routing loads the experts, checked as :func:`mlacalc.plan` checks it (one
    rule: :func:`~mlacalc.serving.plan_checks.check_routing_args`), and refused where no
    layout searched has expert ranks (``ep`` none)."""
    imbalance, routing, skew, rebalance = check_routing_args(m, moe)
    if m.is_moe:
        check_balanced(routing, imbalance, skew, rebalance)
        typed = limits.options().get("--ep", "none")  # --ep 1 as given
        where = f"ep is none (--ep {typed}): no layout searched has expert ranks"
        ranks = limits.ep != "none" or (prefill is not None and prefill.ep != "none")
        refuse_without_ranks(ranks, where, imbalance, skew, rebalance)
    return {
        "routing": routing,
        "expert_skew": skew,
        "rebalance": rebalance,
        "routing_imbalance": imbalance,
    }


def _check_backend(
    backend: Any, m: ModelConfig, hw: Any, engine: str, weights: list, components: tuple
) -> str | None:
    """``moe_backend`` (one value for every point, not searched over) checked as
    :func:`mlacalc.plan` checks it, against the experts of each weight choice the search tries:
    refused where none of them takes it; a point whose experts it does not apply to keeps
    their class (as a plan's fp8 comparison step)."""
    if backend is None:
        return None
    first = None
    for w in weights:
        for comps in components:
            try:
                experts = routed_experts_class(m, w, dict(comps))
                return check_moe_backend(backend, engine, hw, experts)
            except InvalidArgumentError as exc:
                first = first or exc
    raise first or InvalidArgumentError("moe_backend", "no weight choice to apply it to")


def _check_chunks(chunks: Any) -> tuple[int, ...]:
    """The chunked-prefill token budgets tried (sorted, each once; ``None`` or empty: none)."""
    if chunks is None or (isinstance(chunks, (tuple, list)) and not chunks):
        return ()
    values = one_or_many("chunked_prefills", chunks, what="chunked-prefill token budgets")
    return tuple(sorted({count("chunked_prefills", n, 1 << 30) for n in values}))


def _check_component_choices(
    choices: Any, m: ModelConfig
) -> tuple[tuple[tuple[str, str], ...], ...]:
    """The per-component weight formats to try over each weight dtype: the weights as they
    are (no components named) first, then each choice (a mapping of components to formats)."""
    if choices is None:
        return ((),)
    if isinstance(choices, dict):
        choices = (choices,)
    out: list[tuple[tuple[str, str], ...]] = [()]
    for choice in one_or_many("component_choices", choices, what="component formats"):
        try:
            checked = check_components(choice, m)
        except InvalidArgumentError as exc:
            raise InvalidArgumentError("component_choices", exc.message) from None
        key = tuple(sorted(checked.items()))
        if key not in out:
            out.append(key)
    return tuple(out)


def scheduler_of(
    engine: Any,
    engine_defaults: Any,
    max_running: Any,
    max_tokens: Any,
    scheduler: Any,
    overlap_schedule: Any,
) -> tuple[Any, Any, Scheduler, dict[str, Any]]:
    """The search's ``max_running``, ``max_tokens`` and :class:`Scheduler` with the scheduler
    defaults of the engine ``engine_defaults`` names (None: ``engine``'s; ``"none"``: none)
    where left out, by :func:`~mlacalc.serving.scheduler.with_engine_defaults`, the rule
    :func:`mlacalc.plan` follows; and ``{"scheduler_defaults": ..., "scheduler_defaults_applied":
    ...}``. Left out: None, and the scheduler's ``overlap`` at its default (on) where
    ``overlap_schedule`` is None (``overlap_schedule=True`` keeps it on under an engine whose
    default is off). No chunked prefill is filled: the search runs its own budgets."""
    scheduler = _check_scheduler(scheduler)
    if overlap_schedule is not None:
        overlap_schedule = flag("overlap_schedule", overlap_schedule)
    elif scheduler is not None and not scheduler.overlap:
        overlap_schedule = False  # the scheduler's own choice
    args = with_engine_defaults(
        {
            "engine": engine,
            "engine_defaults": engine_defaults,
            "max_running": max_running,
            "max_tokens": max_tokens,
            "overlap_schedule": overlap_schedule,
            "cuda_graph_max_batch": scheduler and scheduler.cuda_graph_max_batch,
            "isl": None,  # no chunked prefill filled (with_engine_defaults: none without isl)
        }
    )
    filled = dataclasses.replace(
        scheduler or Scheduler(),
        overlap=args["overlap_schedule"],
        cuda_graph_max_batch=args["cuda_graph_max_batch"],
    )
    record = {k: args[k] for k in ("scheduler_defaults", "scheduler_defaults_applied")}
    return args["max_running"], args["max_tokens"], filled, record


def _check_scheduler(scheduler: Any) -> Scheduler | None:
    """The engine's host work: a :class:`~mlacalc.serving.scheduler.Scheduler` or None."""
    if scheduler is not None and not isinstance(scheduler, Scheduler):
        raise InvalidArgumentError(
            "scheduler",
            f"must be a mlacalc.serving.scheduler.Scheduler or None, got {scheduler!r}",
        )
    return scheduler


def _check_values(
    gpus: tuple, isl: Any, osl: Any, ttft: Any, tpot: Any, modes: tuple, overlaps: tuple
) -> tuple[tuple[int, ...], int, int, float | None, float | None]:
    """The GPU counts, lengths, latency targets, overlaps and modes; the counts and lengths
    back as Python ints and the targets as floats (numpy numbers accepted, as plan takes them)."""
    for overlap in overlaps:
        if overlap not in ("none", "tbo"):
            raise InvalidArgumentError("overlaps", f"unknown overlap {overlap!r}; use none or tbo")
    counts = tuple(whole(g) for g in gpus)
    if not gpus or any(g is None or g <= 0 for g in counts):
        raise InvalidArgumentError("gpus", f"must be positive integers, got {gpus!r}")
    lengths = tuple(whole(v) for v in (isl, osl))
    for name, value, number in zip(("isl", "osl"), (isl, osl), lengths):
        if number is None or number <= 0:
            raise InvalidArgumentError(name, f"must be a positive integer, got {value!r}")
    targets = tuple(real(v) for v in (ttft, tpot))
    for name, value, number in zip(("ttft", "tpot"), (ttft, tpot), targets):
        if value is not None and (number is None or not math.isfinite(number) or number <= 0):
            raise InvalidArgumentError(name, f"must be a positive number of seconds, got {value!r}")
    for mode in modes:
        if mode not in ("aggregated", "disaggregated"):
            raise InvalidArgumentError(
                "modes", f"unknown mode {mode!r}; use aggregated or disaggregated"
            )
    return counts, lengths[0], lengths[1], targets[0], targets[1]


def _check_engine(
    prefill_pass: Any, output_lag_steps: Any, memory_reserve: Any, modes: tuple = ()
) -> tuple[int, float]:
    """The engine of the aggregated points (refused where ``modes`` has none: it would change
    nothing) and the memory reserve; the lag back as an int and the reserve as a float."""
    if prefill_pass not in ("fused", "separate"):
        raise InvalidArgumentError(
            "prefill_pass", f"must be one of fused, separate, got {prefill_pass!r}"
        )
    lag = whole(output_lag_steps)
    if lag is None or lag < 0:
        raise InvalidArgumentError(
            "output_lag_steps", f"must be a whole number of steps >= 0, got {output_lag_steps!r}"
        )
    reserve = check_number("memory_reserve", memory_reserve, 0.0, 1.0, allow_none=False)
    for name, value, unset in (
        ("prefill_pass", prefill_pass, "fused"),
        ("output_lag_steps", output_lag_steps, 0),
    ):
        if value != unset and "aggregated" not in modes:
            raise InvalidArgumentError(
                name,
                f"describes the aggregated points, but modes are {', '.join(modes)}: add "
                "aggregated (--modes aggregated,disaggregated) or leave it out",
            )
    return lag, reserve


def _check_dtypes(weight_dtypes: tuple, kv_dtypes: tuple) -> None:
    """Every dtype known; an unknown one names the argument (the option) it came in."""
    for name, values, check in (
        ("weight_dtypes", weight_dtypes, canonical_dtype),
        ("kv_dtypes", kv_dtypes, resolve_kv_layout),
    ):
        for value in values:
            try:
                check(value)
            except UnknownDtypeError as exc:
                raise UnknownDtypeError(exc.name, exc.known, exc.what, name) from None


def pareto(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Points no other point beats on both tokens/s per GPU and tokens/s per user (of points
    equal on both, as a decode point paired with several prefill layouts is, the one with the
    shortest TTFT)."""
    pts = sorted(
        points,
        key=lambda p: (
            -p["output_tokens_per_s_per_user"],
            -p["output_tokens_per_s_per_gpu"],
            p["ttft_s"],
        ),
    )
    front, best_gpu = [], -math.inf
    for p in pts:
        if p["output_tokens_per_s_per_gpu"] > best_gpu:
            front.append(p)
            best_gpu = p["output_tokens_per_s_per_gpu"]
    return front


def mark_targets(points: list[dict[str, Any]], ttft: float | None, tpot: float | None) -> None:
    """Mark each point with whether it meets the latency targets and which it misses."""
    for p in points:
        misses = []
        if ttft is not None and p["ttft_s"] > ttft:
            misses.append("misses TTFT")
        if tpot is not None and p["tpot_s"] > tpot:
            misses.append("misses TPOT")
        p["meets_targets"] = not misses
        p["reason"] = ", ".join(misses)


def latency_gaps(mode: str, osl: int) -> int:
    """The TPOTs in a request's latency after its TTFT: aggregated, the ``osl - 1`` gaps after
    its first token (its throughput's, Little's law); disaggregated, the ``osl`` decode steps
    its decode pool runs after the KV transfer (:mod:`mlacalc.serving.disaggregated`)."""
    return osl if mode == "disaggregated" else osl - 1


def spend(req: SearchRequest, points: list[dict[str, Any]]) -> None:
    """What running each point takes: its requests per second and a request's latency
    (``ttft + (osl - 1) x tpot``; disaggregated, ``osl x tpot``: :func:`latency_gaps`), and
    under a budget the replicas of it the budget holds (``budget // gpus``, decode and
    prefill pools together) with their output tokens/s."""
    runs: dict[str, bool] = {}
    for p in points:
        kv = p["kv_dtype"]
        if kv not in runs:
            runs[kv] = engine_runs_kv(req.m, kv, req.engine, req.hw)
        p["engine_runs"] = runs[kv]  # (not a field: best_point prefers these)
        p["requests_per_s"] = p["output_tokens_per_s"] / req.osl
        p["request_latency_s"] = p["ttft_s"] + latency_gaps(p["mode"], req.osl) * p["tpot_s"]
        p["replicas"] = (req.budget or p["gpus"]) // p["gpus"]
        p["budget_gpus"] = req.budget
        p["budget_output_tokens_per_s"] = p["replicas"] * p["output_tokens_per_s"]


def best_point(points: list[dict[str, Any]], budget: bool = False) -> dict[str, Any] | None:
    """The point meeting the targets with the most tokens/s per GPU (under a budget, the most
    tokens/s its replicas give within it), then per user; of equals, a decode point with
    several prefill layouts, the shortest TTFT. A point whose KV cache the engine offers
    (``engine_runs``, :func:`spend`) before any it does not: a cache the engine cannot run is
    no deployment to launch, so it is the best only where no other meets the targets (and
    the search's warnings say so)."""
    return max(
        (p for p in points if p["meets_targets"]),
        key=lambda p: (
            p.get("engine_runs", True),
            p["budget_output_tokens_per_s"] if budget else 0.0,
            p["output_tokens_per_s_per_gpu"],
            p["output_tokens_per_s_per_user"],
            -p["ttft_s"],
        ),
        default=None,
    )


def best_calibration(
    req: SearchRequest,
    best: dict[str, Any] | None,
    points: list[dict[str, Any]],
    models: list[tuple[StepModel, StepModel]],
) -> tuple[str, list[dict[str, Any]]]:
    """How the best point's own kernel classes were predicted, as plan of it describes them:
    its decode step and one prompt's prefill on the GPUs that run it ("" without a best), and
    its decode step's stand-ins with their shares (:func:`~mlacalc.serving.provenance.
    stand_in_parts`, as plan of it says them)."""
    if best is None:
        return "", []
    dec_sm, pf_sm = models[next(i for i, p in enumerate(points) if p is best)]
    b, pp_b = float(best["batch_per_group"]), dec_sm.lay.pp
    dec = dec_sm.step(overlap=best["overlap"], dec_B=b / min(pp_b, b), dec_q=1, dec_S=req.S_avg)
    kernels = [*dec.kernels, *pf_sm.step(pf_N=1, **prompt_args(req)).kernels]
    parts = stand_in_parts(req.profile, req.hw, dec.kernels)
    return calibration_of(req.profile, req.hw, kernels)[1], parts


def explain(
    points: list[dict[str, Any]],
    front: list[dict[str, Any]],
    best: dict[str, Any] | None,
    reasons: Counter[str],
) -> None:
    """Mark each point as on the frontier or not and give the others a reason they lose;
    count the points by reason in ``reasons``."""
    front_ids = {id(p) for p in front}
    axes = ("output_tokens_per_s_per_gpu", "output_tokens_per_s_per_user")
    # whether a frontier point is at least as good on both axes and better on one, for the
    # points still without a reason a block at a time (point by point over the frontier it
    # took 0.8 of an 8.4 s search: DeepSeek-V3 on 8-64 H200, 62,463 points, 74 on the
    # frontier; blocks of 4,096 points keep the comparison's arrays to a few MB)
    todo = [p for p in points if p is not best and not p["reason"]]
    fronts = np.array([[q[a] for a in axes] for q in front], dtype=np.float64).reshape(-1, 1, 2)
    beaten_by_id: dict[int, bool] = {}
    for start in range(0, len(todo), 4096):
        block = todo[start : start + 4096]
        mine = np.array([[p[a] for a in axes] for p in block], dtype=np.float64)
        at_least = (fronts >= mine).all(axis=2)  # (frontier, block)
        better = (fronts != mine).any(axis=2)
        beaten_by_id.update(zip(map(id, block), (at_least & better).any(axis=0).tolist()))
    for p in points:
        p["on_frontier"] = id(p) in front_ids
        if p is best:
            p["reason"] = "best"
        elif not p["reason"]:
            beaten = beaten_by_id[id(p)]
            p["reason"] = (
                "on the frontier, fewer tokens/s per GPU than the best"
                if p["on_frontier"]
                else "beaten on tokens/s per GPU and per user by a frontier point"
                if beaten
                else "ties a frontier point on tokens/s per GPU and per user"
            )
        reasons[p["reason"].split(",")[0] if p is not best else "best"] += 1


def search(
    model: ModelConfig | str,
    hardware: HardwareSpec | str,
    gpus: tuple[int, ...] | list[int] = (8,),
    *,
    isl: int,
    osl: int,
    ttft: float | None = None,
    tpot: float | None = None,
    weight_dtypes: tuple[str, ...] | None = None,
    kv_dtypes: tuple[str, ...] = ("bf16", "fp8"),
    modes: tuple[str, ...] = ("aggregated", "disaggregated"),
    overlaps: tuple[str, ...] = ("none", "tbo"),
    batches: tuple[int, ...] = BATCHES,
    memory_reserve: float | None = None,
    page_size: int | None = None,
    prefill_pass: str = "fused",
    output_lag_steps: int = 0,
    profile: Any = None,
    max_running: int | None = None,
    max_tokens: int | None = None,
    scheduler: Scheduler | None = None,
    engine: str | None = None,
    component_choices: Any = None,
    chunked_prefills: Any = CHUNKS,
    overlap_schedule: bool | None = None,
    engine_defaults: str | None = None,
    tp: Any = None,
    pp: Any = None,
    ep: Any = "any",
    dp_attention: Any = "both",
    redundant_experts: Any = None,
    routing: str = "random",
    expert_skew: float = 0.0,
    rebalance: bool | None = None,
    routing_imbalance: float = 1.0,
    prefill_tp: Any = None,
    prefill_ep: Any = None,
    prefill_dp_attention: Any = None,
    prefill_redundant_experts: Any = None,
    prefix_cache_hit: float = 0.0,
    shared_prefix: int = 0,
    engine_memory: float | None = None,
    moe_backend: str | None = None,
    served_bias: bool = False,
    state_dtype: str | None = None,
) -> SearchResult:
    """Explore deployments of ``model`` on ``gpus`` for requests of ``isl`` prompt and ``osl``
    output tokens; ``ttft`` and ``tpot`` (seconds) are the targets. ``gpus``: a list of GPU
    counts, each a separate option (``gpus=[8]``, ``--gpus 8,``); one number (``gpus=8``), a
    budget split between a decode pool and a prefill pool of any of :func:`budget_counts` and
    replicas (each point says how many it holds, the best the most tokens/s). ``prefill_pass`` and
    ``output_lag_steps`` describe the engine of the aggregated points as :func:`mlacalc.plan`
    does: prompts in the decode batch's pass (``"fused"``) or in a pass of their own before it
    (``"separate"``), and the steps a token waits before it is read back; ``max_running``,
    ``max_tokens`` and ``scheduler`` what the engine admits and its host work
    (:mod:`mlacalc.serving.scheduler`), as :func:`mlacalc.plan` takes them;
    ``component_choices``: per-component weight formats to try beside the weights as they are
    (``[{"experts": "nvfp4"}, {"experts": "nvfp4", "attention": "fp8"}]``), each point saying
    its ``component_dtypes`` (:mod:`mlacalc.serving.precision`); ``chunked_prefills``: the
    token budgets of chunked prefill the aggregated points are also run at (each point says
    its ``chunked_prefill``, None: whole prompts; ``None`` or ``()``: whole prompts only; with
    ``prefill_pass="separate"`` none, as plan refuses the two together). With an ``engine``,
    its scheduler defaults fill ``max_running``, ``max_tokens``, the overlap
    (``overlap_schedule``, else the ``scheduler``'s where it turns it off) and the scheduler's
    ``cuda_graph_max_batch`` where left out, as :func:`mlacalc.plan` and ``mlacalc search
    --engine`` do (not its chunked prefill: the search runs ``chunked_prefills``);
    ``engine_defaults`` names another engine's, or ``"none"`` (``SearchResult.
    scheduler_defaults`` and ``scheduler_defaults_applied`` say what was taken).

    The layouts searched, of the decode pool and a disaggregated prefill pool alike, can be
    limited: ``tp`` and ``pp`` to the degrees listed, ``ep`` to ``"none"`` or the degrees
    listed (``"any"``: the search's own), ``dp_attention`` to ``"on"`` or ``"off"``
    (``"both"``), ``redundant_experts`` to a count every expert-parallel layout places
    (None: the fewest that make ``ep`` divide the expert slots); ``prefill_tp``,
    ``prefill_ep``, ``prefill_dp_attention`` and ``prefill_redundant_experts`` limit a
    disaggregated prefill pool apart (None: as the decode pool; a prefill pool runs one
    stage, whatever ``pp``); limits that leave no candidate are refused, naming the limit
    and counting what each reason ruled out. ``routing``, ``expert_skew``, ``rebalance``
    and ``routing_imbalance`` load the routed experts of every point as :func:`mlacalc.plan`
    does (refused as plan refuses them; ``SearchResult.constraints()`` says what the search
    ran under). ``prefix_cache_hit``, ``shared_prefix``, ``state_dtype``, ``page_size`` (None: the
    engine's page; 16 with none), ``memory_reserve`` (None: 0.1) or ``engine_memory`` (not both) and
    ``moe_backend``: as :func:`mlacalc.plan` takes them, for every point. ``served_bias``: the
    targets met as served (:func:`predicted_targets`; else :func:`target_edge_warnings`).

    Examples
    --------
    >>> r = search("llama-3-8b", "H100-SXM", [1, 2], isl=1000, osl=200, tpot=0.02)
    >>> r.best["tpot_s"] <= 0.02 and r.best["fits"]
    True
    """
    args = dict(locals())  # the first statement: exactly the arguments
    t0 = time.perf_counter()
    req, served = _checked(args)  # every argument, checked and normalised
    reasons: Counter[str] = Counter()
    cands = candidates(req, reasons)
    if not cands and req.limited:
        raise _limits_left_nothing(req, reasons)
    secs = time_candidates(cands, req.profile)
    # kernels by class, with the variant and shapes their class follows from, as a plan's
    kernels = spec_kernels(list({id(sp): sp for c in cands for sp in c.specs}.values()))
    profile_name, calibration = calibration_of(req.profile, req.hw, kernels)
    pools = prefill_pools(req, cands, secs)
    found = evaluate(req, cands, secs, pools, reasons)
    ruled_out = {k: v for k, v in reasons.items() if v}
    spend(req, found.points)
    mark_targets(found.points, req.ttft, req.tpot)
    best = refined(req, pools, found, settle(req, found))
    _backend_of_points(req, (points := found.points) + ([best] if best else []))
    front = pareto(points)
    best_cal, parts = best_calibration(req, best, points, found.models)
    explain(points, front, best, reasons)
    said = _search_warnings(req, best, front, bool(points), parts, served is not None)
    return _finished(
        req,
        parts,
        model=req.m.name,
        hardware=req.hw.name,
        isl=req.isl,  # checked: Python ints
        osl=req.osl,
        ttft_target_s=req.ttft,
        tpot_target_s=req.tpot,
        points=points,
        frontier=[dict(p) for p in front],
        best=dict(best) if best else None,
        reasons={k: v for k, v in reasons.items() if v > 0},
        layouts=found.layouts,
        seconds=time.perf_counter() - t0,
        notes=_all_notes(req, ruled_out, best, points, overlap_schedule),
        prefill_pass=prefill_pass,
        output_lag_steps=output_lag_steps,
        ruled_out=ruled_out,
        profile=profile_name,
        calibration=calibration + req.engine_note if points else "",  # as plan's no-fit: no times
        engine=req.engine,
        memory_reserve=req.memory_reserve,
        engine_memory=req.engine_memory and req.engine_memory[1],
        engine_memory_of=req.engine_memory and req.engine_memory[0],
        state_dtype=req.state_dtype,
        page_size=req.page_size,
        best_calibration=best_cal + req.engine_note if best_cal else "",
        warnings=said + _pool_busy(best, found),
        served_targets=served,
        budget=req.budget,
        **req.scheduler_record,
        limits=req.limits,
        prefill_limits=req.prefill_limits,
        routing=dict(req.routing),
    )


def _finished(req: SearchRequest, stand_ins: list[dict[str, Any]], **fields: Any) -> SearchResult:
    """The result of ``fields`` with the plan command of its best point: the engine named (its
    kernels and no other defaults) and the admission values the search ran, as the CLI writes
    them; and how its times were predicted (plan's ``prediction`` of the same device, engine
    and model, with the best point's ``stand_ins``: :func:`~mlacalc.serving.provenance.
    with_stand_ins`)."""
    route = (
        with_stand_ins(
            prediction_route(req.profile, req.hw, req.engine, req.engine_note, req.m), stand_ins
        )
        if fields["points"]
        else {}  # nothing timed: no route of times to say (plan says "No times" there)
    )
    # the model's routed experts: a launch command's load balancer counts their slots; the
    # prompts' prefix caching every point was timed with
    fields.update(prefix_cache_hit=req.prefix_cache_hit, shared_prefix=req.shared_prefix)
    result = SearchResult(**fields, routed_experts=req.m.n_routed_experts or 0, prediction=route)
    if result.best is None or req.replay is None:
        return result
    sched = req.scheduler
    values = {
        "max_running": req.max_running,
        "max_tokens": req.max_tokens,
        "host_step_s": sched.host_step_s if sched is not None else 0.0,
        "overlap_schedule": sched.overlap if sched is not None else True,
        # no host work for overlap to hide: its flag changes nothing and plan would warn so
        "host_idle": sched is None or sched.idle,
    }
    engine, profile = req.named
    named = None if profile is None else profile if isinstance(profile, str) else result.profile
    model, sets = req.replay
    line = plan_command(model, result.hardware, result, result.best, named)
    line += sets + scheduler_words(engine, values)
    return dataclasses.replace(result, plan_command=line)


def _search_warnings(
    req: SearchRequest,
    best: dict[str, Any] | None = None,
    front: list[dict[str, Any]] = (),
    timed: bool = True,
    stand_ins: list[dict[str, Any]] = (),
    served: bool = False,
) -> tuple[str, ...]:
    """What the search says beside its points: the engine that stood in for another's
    kernels, the MLA geometry no measured row has, what plan of the best says of its formats
    (:func:`~mlacalc.serving.plan_checks.format_warnings`: a KV cache or weight dtype the
    engine or device cannot run as asked), and the same of each other format among the
    frontier's points, naming them (a capacity planner's trial: an nvfp4 cache was the best
    under TensorRT-LLM on H200 with no warning, where plan of it said it cannot run one).
    First, what plan of any point says of its device and engine where they were not fitted
    (:func:`~mlacalc.serving.provenance.device_warnings`: TensorRT-LLM on another vendor's
    GPU, the device's route and its error; a trial12 search on MI300X said neither); the
    route's line only where a point was ``timed``, as plan says it of a timed plan only; and
    the best point's decode step's ``stand_ins`` as plan of it says them (a trial's SGLang and
    vLLM searches agreed within 0.1% because three quarters of both steps were one engine's
    fits, and said so only in the calibration line)."""
    said = list(device_warnings(req.profile, req.hw, req.engine, req.engine_note, timed=timed))
    if timed:  # a stand-in's kernels and a geometry's rows are said of times, as plan says them
        said += [req.engine_note.removeprefix("; "), mla_geometry_note(req.m)]
    said += _best_layout_warnings(req, best)
    if not served:  # held to the served targets already
        said += target_edge_warnings(best, req.ttft, req.tpot)
    said += stand_in_warnings(req.engine, list(stand_ins))
    seen: set[tuple] = set()
    raw: set[str] = set()  # each said once, of the first point it is said of
    for p in ([best] if best else []) + list(front):
        chosen, comps = _point_weights(p)
        key = (p["kv_dtype"], chosen, tuple(sorted(comps.items())))
        if key in seen:
            continue
        seen.add(key)
        ws = [w for w in format_warnings(req.m, req.hw, req.engine, p["kv_dtype"], chosen, comps)
              if w not in raw]  # fmt: skip
        ws += [w for w in [requantized_words(req.m, chosen, comps)] if w and w not in raw]
        raw.update(ws)
        if p is not best:  # a frontier point's: which points it is said of
            what = f"{p['kv_dtype']} KV" + (f", {chosen} weights" if chosen else "")
            ws = [f"frontier points with {what}: {w}" for w in ws]
        said += ws
    return tuple(w for w in said if w)


def _checked(args: dict[str, Any]) -> tuple[SearchRequest, dict[str, float | None] | None]:
    """:func:`search`'s arguments checked (:func:`check_search`) and, with ``served_bias``,
    its targets as served beside the request held to the predictions that meet them
    (:func:`predicted_targets`); ``served_bias`` with no target refused."""
    served_bias = flag("served_bias", args.pop("served_bias"))
    req = check_search(**args)
    if not served_bias:
        return req, None
    if req.ttft is None and req.tpot is None:
        raise InvalidArgumentError(
            "served_bias",
            "holds the ttft and tpot targets to the served bias, and neither is given: give "
            "ttft or tpot (--ttft / --tpot), or leave served_bias off",
        )
    served = {"ttft_s": req.ttft, "tpot_s": req.tpot}
    return dataclasses.replace(req, **predicted_targets(req.ttft, req.tpot)), served


def predicted_targets(ttft: float | None, tpot: float | None) -> dict[str, float | None]:
    """The predicted TTFT and TPOT that meet ``ttft`` and ``tpot`` as served, at the served
    figures' measured median bias (:data:`~mlacalc.serving.provenance.SERVING_ERRORS`, each a
    signed (predicted - measured) / measured: predictions short of the measured runs).

    >>> {k: round(v, 4) for k, v in predicted_targets(2.0, 0.05).items()}
    {'ttft': 1.922, 'tpot': 0.0435}
    """
    out: dict[str, float | None] = {}
    for name, target, key in (("ttft", ttft, "online_ttft"), ("tpot", tpot, "online_tpot")):
        bias = min(SERVING_ERRORS[key]["median"], 0.0)  # an over-prediction leaves it alone
        out[name] = None if target is None else target * (1 + bias)
    return out


def target_edge_warnings(
    best: dict[str, Any] | None,
    ttft: float | None,
    tpot: float | None,
    fix: str = "rerun with --served-bias to hold the predicted {name} to {held}",
    what: str = "the best point's",
) -> tuple[str, ...]:
    """The best point's TPOT or TTFT under its target by the prediction but over it at the
    served figures' measured median bias (:data:`~mlacalc.serving.provenance.SERVING_ERRORS`:
    predicted ITL ran 13.0% short of TensorRT-LLM's online Llama runs, TTFT 3.9%), with what it
    serves at that bias and the target that keeps the margin (a fleet engineer's trial: a search
    chose a point at 50.0 ms against a 50 ms target, the expected-error line two lines below
    saying served TPOT runs 13% short, and nothing joined the two); ``fix``: what to do, with
    ``{name}`` and ``{held}`` (the app's planner has no --served-bias: it names the target);
    ``what``: whose figure it is.

    Examples
    --------
    >>> w, = target_edge_warnings({"tpot_s": 0.05, "ttft_s": 0.1}, None, 0.05)
    >>> w[:40]
    "the best point's TPOT 50.0 ms meets the "
    >>> w[w.index("rerun"):]
    'rerun with --served-bias to hold the predicted TPOT to 43.5 ms'
    >>> target_edge_warnings({"tpot_s": 0.04, "ttft_s": 0.1}, None, 0.05)
    ()
    """
    if best is None:
        return ()
    held_to = predicted_targets(ttft, tpot)
    out = []
    for key, name, target, error in (
        ("tpot_s", "TPOT", tpot, SERVING_ERRORS["online_tpot"]),
        ("ttft_s", "TTFT", ttft, SERVING_ERRORS["online_ttft"]),
    ):
        bias = error["median"]  # (predicted - measured) / measured at the median
        if target is None or bias >= 0 or best.get(key) is None:
            continue
        served = best[key] / (1 + bias)
        if served <= target:
            continue
        margin = held_to[name.lower()]  # --served-bias's target, as the CLI's title writes it
        held = f"{margin:,.6g} s" if margin >= 1 else f"{margin * 1e3:,.6g} ms"
        out.append(
            f"{what} {name} {best[key] * 1e3:,.1f} ms meets the {target * 1e3:,.1f} ms "
            f"target by the prediction, which ran {-bias:.1%} short of the measured {name} at the "
            f"median (TensorRT-LLM's online Llama runs on H100 / H200, {SERVING_ERROR_SOURCE}; "
            f"not measured for other engines or models): at that bias it serves "
            f"{served * 1e3:,.1f} ms, over the target; " + fix.format(name=name, held=held)
        )
    return tuple(out)


def _point_weights(p: dict[str, Any]) -> tuple[str | None, dict[str, str]]:
    """A point's weights as plan would be asked for them: the dtype chosen (None where the
    point keeps the checkpoint's own format) and its components' dtypes."""
    chosen = None if str(p["weight_format"]).startswith("checkpoint ") else p["weight_dtype"]
    return chosen, dict(p.get("component_dtypes") or {})


def _pool_busy(best: dict[str, Any] | None, found: Any) -> tuple[str, ...]:
    """What plan of the best point says of its prefill pool busy
    :data:`~mlacalc.serving.plan.PREFILL_BUSY_WARN` of its time or more (a disaggregated best:
    its requests/s over the prompts/s its pool finishes, as
    :func:`~mlacalc.serving.plan.prefill_busy_warning` has them): a trial's searches
    recommended pools 94% and 99% busy, which plan of them warned of and the search did not."""
    check = found.pending.get(id(best)) if best and best["mode"] == "disaggregated" else None
    if check is None or not check[2].rate:
        return ()
    served, capacity = float(best["requests_per_s"]), float(check[2].rate)
    if served / capacity < PREFILL_BUSY_WARN:
        return ()
    return ("the best point: " + prefill_busy_words(served, capacity),)


def _best_layout_warnings(req: SearchRequest, best: dict[str, Any] | None) -> tuple[str, ...]:
    """What plan of the best says of its cache copied on tensor-parallel ranks: fewer K/V
    heads than tp (:func:`~mlacalc.serving.plan_checks.kv_head_copies`), an MLA latent on
    every rank (:func:`~mlacalc.serving.plan_checks.latent_copies`, its figures sized as the
    search sized the point: the same bytes as plan's capacity, the weights of the fullest GPU
    under the search's memory rule and one sequence's cache in pages at the context), a DSA
    indexer whole on every rank (:func:`~mlacalc.serving.plan_checks.indexer_copies`)."""
    if not best or best["tp"] <= 1:
        return ()
    m = req.m
    lay = make_layout(
        m, best["decode_gpus"], tp=best["tp"], dp=best["dp"], pp=best["pp"], ep=best["ep"],
        dp_attention=best["dp_attention"], redundant_experts=best["redundant_experts"],
    )  # fmt: skip
    p_lay = None
    if best.get("prefill_tp"):
        p_lay = make_layout(
            m, best["prefill_gpus"], tp=best["prefill_tp"], ep=best["prefill_ep"] or 1,
            dp_attention=bool(best["prefill_dp_attention"]),
            redundant_experts=best["prefill_redundant_experts"] or 0,
        )  # fmt: skip
    sized, components = _point_weights(best)
    comps = tuple(sorted(components.items()))
    kv = with_state_dtype(resolve_kv_layout(best["kv_dtype"]), req.state_dtype)

    def figures(la: Layout) -> tuple[int, int, int]:
        room = max(req.room(layout_weights(m, la, sized, comps, req.weight_cache)), 0)
        per_token = kv_bytes_per_token_per_gpu(m, kv, la)
        return (
            per_token,
            room // per_token,
            room // per_sequence_bytes(req, kv, la, req.context) * la.dp,
        )

    return (
        kv_head_copies(m, lay, p_lay)
        + latent_copies(m, lay, p_lay, figures)
        + indexer_copies(m, lay, p_lay)
        + trtllm_attention_tp(req.engine, lay, p_lay)
    )


def _backend_of_points(req: SearchRequest, points: list[dict]) -> None:
    """Each point's ``moe_backend``: the search's where the point's routed experts take it,
    else None (its experts ran their own class, and a plan of the point refuses the option:
    a review's fp8 point's plan command carried ``--moe-backend trtllm-gen``)."""
    backend = dict(req.routing).get("moe_backend")
    took: dict[tuple, str | None] = {}
    for p in points:
        comps = tuple(sorted((p.get("component_dtypes") or {}).items()))
        key = (None if req.own else p.get("weight_dtype"), comps)
        if key not in took:
            took[key] = None
            if backend is not None:
                try:
                    experts = routed_experts_class(req.m, key[0], dict(comps))
                    took[key] = check_moe_backend(backend, req.engine, req.hw, experts)
                except InvalidArgumentError:
                    pass
        p["moe_backend"] = took[key]


def _all_notes(
    req: SearchRequest,
    ruled_out: dict[str, int],
    best: dict | None,
    points: list[dict],
    overlap_schedule: bool | None,
) -> tuple[str, ...]:
    """A search's notes: the request's, the weights ruled out, the edge of the batches
    searched and the overlap's idle steps."""
    return (
        _notes(req)
        + _weights_note(req, ruled_out)
        + _edge_note(req, best, points)
        + _nearest_note(req, best, points)
        + overlap_idle_note(overlap_schedule, req.scheduler)
    )


def _nearest_note(req: SearchRequest, best: dict | None, points: list[dict]) -> tuple[str, ...]:
    """Where points were timed but none meets the targets: the fastest TPOT and TTFT any
    point reached, with its deployment, so the user sees how far to relax a target (a
    capacity analyst's --tpot 1ms was told only that no deployment meets it)."""
    if best is not None or not points or (req.tpot is None and req.ttft is None):
        return ()
    said = []
    for key, name, target in (("tpot_s", "TPOT", req.tpot), ("ttft_s", "TTFT", req.ttft)):
        if target is None:
            continue
        p = min(points, key=lambda q: q[key])
        if p[key] <= target:
            continue  # some point meets this one: the other target (or both at once) binds
        said.append(
            f"the fastest {name} any point reached is {p[key] * 1e3:,.1f} ms ({p['layout']}, "
            f"{p['mode']}, {p['gpus']:,} GPUs, batch {p['batch_per_group']:,} a group): "
            f"--{name.lower()} {target * 1e3:,.1f} ms is below it"
        )
    if not said:
        said.append(
            "each target is met by some point, never both at once: relax either, or search "
            "more GPUs"
        )
    return ("no point meets the targets: " + "; ".join(said),)


def _limits_left_nothing(req: SearchRequest, reasons: Counter[str]) -> InvalidArgumentError:
    """The error of limits that leave no candidate to time: named after the limit that ruled
    out the most (the first in tp, pp, ep, DP-attention order among equals), with every
    reason's count of candidates (layout x KV dtype x batch x mode)."""
    by = [(n, k) for k, n in reasons.items() if k.startswith("ruled out by --") and n]
    order = ("--tp", "--pp", "--ep", "--dp-attention", "--redundant-experts")
    name = "tp"
    if by:
        top = max(by, key=lambda nk: (nk[0], -order.index(nk[1].split()[3])))[1]
        name = top.split()[3].removeprefix("--").replace("-", "_")
    counts = "; ".join(
        f"{k}: {n:,}" for k, n in sorted(reasons.items(), key=lambda kv: -kv[1]) if n
    )
    gpus = ", ".join(str(g) for g in req.gpus)
    return InvalidArgumentError(
        name,
        f"the layout limits leave no candidate to time on {gpus} GPUs ({counts}); widen them "
        f"or give more GPUs (--gpus)",
    )


def settle(req: SearchRequest, found: Points) -> dict[str, Any] | None:
    """The best point, once it and the frontier are points plan reproduces: a disaggregated
    point whose closed loop plan settles at another batch (seen through the whole batches
    below it, :func:`mlacalc.serving.search_points.settles`) is dropped, counted under its
    reason, until the best and the frontier hold none. The other points are checked on the
    searched batches only (a whole-batch check of each costs a decode step of every batch
    below it)."""
    while True:
        best = best_point(found.points, req.budget is not None)
        shown = ([best] if best is not None else []) + pareto(found.points)
        if req.budget is None:  # a throughput target's replicas
            shown += list(count_bests(found.points).values())
        gone = [p for p in shown if not settles(req, found, p)]
        if not gone:
            return best
        found.drop(gone)


def refined(
    req: SearchRequest, pools: dict[Any, list[Any]], found: Points, best: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The best point once the batches of :func:`refine_seeds` and :func:`unmet_seeds` are
    refined, their points joining ``found``."""
    first = len(found.points)
    if best is not None:
        seeds = refine_seeds(req, found.points, req.budget is not None)
        refine_all(req, seeds, pools, found)
        spend(req, found.points[first:])  # (refine_gaps weighs its gaps against them)
        mark_targets(found.points[first:], req.ttft, req.tpot)
        top = best_point(found.points, req.budget is not None)
        by_setup: dict[tuple, list[dict[str, Any]]] = {}
        for p in found.points:
            by_setup.setdefault(setup_of(p), []).append(p)
        for seed in seeds:
            mine = by_setup[setup_of(seed)]
            top = refine_gaps(req, seed, pools, found, BELOW_PASSES - 1, mine, top)
    for low in unmet_seeds(found.points[:first], req.budget is not None):
        refine_below(req, low, pools, found)
    if len(found.points) == first:
        return best
    spend(req, found.points[first:])  # the refined points
    mark_targets(found.points[first:], req.ttft, req.tpot)
    return settle(req, found)


def refine_seeds(
    req: SearchRequest, points: list[dict[str, Any]], budget: bool
) -> list[dict[str, Any]]:
    """The points whose batches are refined: the best point meeting the targets of each
    setup (decode GPUs, layout, dtypes, overlap and mode: what :func:`refine` times again)
    that could pass the best once refined, with the best point meeting the targets of each
    of the :data:`REFINE_SETUPS` best decode pool sizes and, under a budget, of each
    aggregated size (so that a larger budget holds at least copies of a smaller one's
    refined best).

    A setup could pass the best when :func:`refine_bound` of it reaches the best's figure (its
    tokens/s per GPU, under a budget the budget's tokens/s): refinement adds batches between
    the setup's best batch and the searched ones next to it, so what it can find is bounded by
    the grid's spacing there, not by a constant margin."""

    def key(p: dict[str, Any]) -> float:
        return best_key(p, budget)

    ranked = sorted(
        (p for p in points if p["meets_targets"]),
        key=lambda p: (p.get("engine_runs", True), key(p), p["output_tokens_per_s_per_gpu"]),
        reverse=True,
    )
    seeds: dict[tuple, dict[str, Any]] = {}
    for p in ranked:
        if (p["mode"], p["decode_gpus"]) not in seeds:
            seeds[(p["mode"], p["decode_gpus"])] = p
            if len(seeds) == REFINE_SETUPS:
                break
    if budget:
        # and each aggregated size's best (a size the budget replicates): copies of a smaller
        # budget's refined best are then among the points (a new-user trial's gpt-oss-120b on
        # B200: 16 GPUs gave 274,954 tok/s, under two copies of 8 GPUs' b971, 324,773)
        for p in ranked:
            if p["mode"] == "aggregated":
                seeds.setdefault((p["mode"], p["decode_gpus"]), p)
    if not ranked:
        return []
    # every other setup whose refined best could pass the best (refine_bound)
    top = key(ranked[0])
    by_setup: dict[tuple, list[dict[str, Any]]] = {}
    for p in points:
        by_setup.setdefault(setup_of(p), []).append(p)
    chosen = {id(p) for p in seeds.values()}
    out = list(seeds.values())
    done = {setup_of(p) for p in out}
    for p in ranked:
        setup = setup_of(p)
        if setup in done:
            continue
        done.add(setup)  # ranked: p is the setup's best meeting the targets
        if id(p) not in chosen and refine_bound(req, p, by_setup[setup], key) >= top:
            out.append(p)
    taken = {(setup_of(p), p["batch_per_group"]) for p in out}
    for p in [] if budget else count_seeds(req, points):  # (a budget's sizes are its own)
        if (setup_of(p), p["batch_per_group"]) not in taken:
            taken.add((setup_of(p), p["batch_per_group"]))
            out.append(p)
    return out


def per_gpu(p: dict[str, Any]) -> float:
    """A point's output tokens/s per GPU."""
    return p["output_tokens_per_s_per_gpu"]


def count_bests(points: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The point meeting the targets of the most tokens/s of each GPU count (a disaggregated
    point's decode and prefill pools together): what a throughput target replicates
    (:func:`throughput_gpus` takes the count whose whole replicas need the fewest GPUs).
    As for the best, a point whose KV cache the engine runs (``engine_runs``) comes before
    any it does not, whatever their tokens/s: :func:`throughput_gpus` replicates only those,
    so theirs is the count's best that refinement must reach."""

    def rank(p: dict[str, Any]) -> tuple[bool, float]:
        return (p.get("engine_runs", True), per_gpu(p))

    out: dict[int, dict[str, Any]] = {}
    for p in points:
        if p["meets_targets"] and (p["gpus"] not in out or rank(p) > rank(out[p["gpus"]])):
            out[p["gpus"]] = p
    return out


def count_seeds(req: SearchRequest, points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The points a throughput target needs refined: the best point meeting the targets of
    each GPU count (:func:`count_bests`) and, per count, the best of each other setup there
    whose refined best could pass it (:func:`refine_bound`, by tokens/s per GPU). Without
    them a target replicated a count's best at its grid batch (a capacity planner's trial:
    DeepSeek-V3 on GB200, 8 + 8 GPUs disaggregated at batch 256, 3,275 tok/s/GPU, where its
    refined batch gives about 4,650)."""
    by: dict[tuple, list[dict[str, Any]]] = {}
    for p in points:
        by.setdefault((p["gpus"], setup_of(p)), []).append(p)
    tops = {n: per_gpu(p) for n, p in count_bests(points).items()}
    out, seen = [], set()
    for p in sorted((p for p in points if p["meets_targets"]), key=per_gpu, reverse=True):
        k = (p["gpus"], setup_of(p))
        if k in seen:
            continue
        seen.add(k)  # p is the best of its setup at its count
        if per_gpu(p) >= tops[p["gpus"]] or refine_bound(req, p, by[k], per_gpu) >= tops[p["gpus"]]:
            out.append(p)
    return out


def best_key(p: dict[str, Any], budget: bool) -> float:
    """What the best is chosen by: tokens/s per GPU, under a budget the budget's tokens/s."""
    return p["budget_output_tokens_per_s"] if budget else p["output_tokens_per_s_per_gpu"]


def setup_of(p: dict[str, Any]) -> tuple:
    """What :func:`refine` keeps of a seed point: its mode, decode GPUs, layout (with its
    redundant experts), dtypes and overlap (its batches, chunk budgets and prefill pools are
    timed again)."""
    comps = p.get("component_dtypes")
    comps = tuple(sorted(comps.items())) if comps else ()
    layout = (p["tp"], p["dp"], p["pp"], p["ep"], p["dp_attention"], p["redundant_experts"])
    return (p["mode"], p["decode_gpus"], layout, p["kv_dtype"], p["weight_format"], comps,
            p["overlap"])  # fmt: skip


def refine_bound(
    req: SearchRequest, best: dict[str, Any], setup: list[dict[str, Any]], key: Any
) -> float:
    """The most ``key`` (tokens/s per GPU, or the budget's) :func:`refine` can find for the
    setup of ``best`` (its best point meeting the targets; ``setup``: all its points): the
    batches it adds lie below the next searched batch ``z`` above ``best``'s (twice it past
    the grid's end). A step takes no less time at a larger batch and its time grows at most
    in proportion (a fixed part and a part per sequence), so tokens/s grow with the batch
    and at most in proportion to it, save dips where a kernel's rows cross a tile edge
    (:data:`DIP_MARGIN`): bounded by :data:`DIP_MARGIN` times the setup's best figure at
    batches from ``best``'s up to ``z`` (points missing the targets too) or, where ``z``
    made none (its cache does not fit), ``best``'s figure scaled by ``z / b``."""
    b = best["batch_per_group"]
    z = min((x for x in req.batches if x > b), default=min(2 * b, MAX_BATCH))
    near = [key(p) for p in setup if b <= p["batch_per_group"] <= z]
    if not any(p["batch_per_group"] == z for p in setup):
        near.append(key(best) * z / b)
    return DIP_MARGIN * max(near)


def unmet_seeds(points: list[dict[str, Any]], budget: bool) -> list[dict[str, Any]]:
    """The best point at the smallest batch of each setup (:func:`setup_of`) none of whose
    points meets the targets, where the batches below it could pass the best (none meeting
    them: any): tokens/s fall with the batch (save :data:`DIP_MARGIN`), so they could where
    the point's figure reaches the best's over :data:`DIP_MARGIN`. A grid whose first batch
    misses the targets for a setup left it out of refinement (a review's Qwen3-30B-A3B on
    8 H200 with batches 512 and 784: TP1 DP-attention8 EP8 missed TPOT at both, and its
    b510, 10,232.9 tok/s/GPU, passes the best found, TP2 DP-attention4 EP8's 9,868.7)."""
    best = best_point(points, budget)
    top = best_key(best, budget) if best is not None else 0.0
    by_setup: dict[tuple, list[dict[str, Any]]] = {}
    for p in points:
        by_setup.setdefault(setup_of(p), []).append(p)
    out = []
    for setup in by_setup.values():
        if any(p["meets_targets"] for p in setup):
            continue
        first = min(p["batch_per_group"] for p in setup)
        low = max((p for p in setup if p["batch_per_group"] == first),
                  key=lambda p: best_key(p, budget))  # fmt: skip
        if first > 1 and DIP_MARGIN * best_key(low, budget) >= top:
            out.append(low)
    return out


def refine_below(
    req: SearchRequest, low: dict[str, Any], pools: dict[Any, list[Any]], found: Points
) -> None:
    """Batches below ``low`` (an :func:`unmet_seeds` point) for its setup, in passes as
    :func:`refine` spaces them: from 1 up to its batch, then as :func:`refine_gaps` goes on,
    at most :data:`BELOW_PASSES` passes in all (each narrows a gap about 13-fold: 2,048 is
    spent in four). Two passes left the review's Qwen3-30B-A3B on 8 H200 (batches 512, 784)
    at b493, 10,076.2 tok/s/GPU, where b510 gives 10,232.9."""
    first = len(found.points)
    refine(req, low, pools, found, edges=(1, low["batch_per_group"]))
    spend(req, found.points[first:])
    mark_targets(found.points[first:], req.ttft, req.tpot)
    mine = [p for p in found.points if setup_of(p) == setup_of(low)]
    top = best_point(found.points, req.budget is not None)
    refine_gaps(req, low, pools, found, BELOW_PASSES - 1, mine, top)


def refine_gaps(
    req: SearchRequest, seed: dict[str, Any], pools: dict[Any, list[Any]], found: Points,
    passes: int, mine: list[dict[str, Any]], top: dict[str, Any] | None,
) -> dict[str, Any] | None:  # fmt: skip
    """Further passes of :func:`refine` for the setup of ``seed`` (:func:`setup_of`; ``mine``:
    its points, timed and marked, a list the new ones join; ``top``: the best point found,
    :func:`best_point`, returned as the passes leave it): between the batches timed next to
    the setup's best point meeting the targets (none: nothing more), while a gap beside it
    could pass the best found (:func:`gap_bounds`) and is two batches wide or more, at most
    ``passes`` passes. Where that best is the setup's smallest timed batch, the batches from 1
    up to it count as a gap where :data:`DIP_MARGIN` times its figure reaches the best's
    (tokens/s fall with the batch, save a dip). Without these passes next to a best meeting
    the targets at a searched batch, a looser target gave a worse best (a brief's Qwen3-30B-A3B
    on 8 H200, 2,000 in / 500 out: TPOT <= 50 ms gave TP1 DP8's b512, 10,287.5 tok/s/GPU, and
    <= 49.5 ms TP1 DP-attention8 EP8's b506, 10,472.1 at 48.27 ms, which meets 50 ms too:
    that setup's TPOT rises 48.27 -> 49.35 ms from b506 to b507, where its attention groups'
    prompts a step pass one and each takes two in half its steps, ``ranks.synced_prompts``)."""
    setup, budget = setup_of(seed), req.budget is not None
    for _ in range(passes):
        met = [p for p in mine if p["meets_targets"]]
        if not met or top is None:
            return top
        best = max(met, key=lambda p: best_key(p, budget))
        bar = best_key(top, budget)
        lo, hi = gap_bounds(best, mine, bar, budget)
        b = best["batch_per_group"]
        if b > 1 and b == min(p["batch_per_group"] for p in mine):
            lo = 1 if DIP_MARGIN * best_key(best, budget) >= bar else None
        if (lo, hi) == (None, None):
            return top
        first = len(found.points)
        refine(req, best, pools, found, edges=(lo, hi))
        new = found.points[first:]
        if not new:
            return top
        spend(req, new)
        mark_targets(new, req.ttft, req.tpot)
        mine += [p for p in new if setup_of(p) == setup]
        top = best_point([top, *new], budget)
    return top


def gap_bounds(
    seed: dict[str, Any], setup: list[dict[str, Any]], top: float, budget: bool
) -> tuple[int | None, int | None]:
    """The timed batches on each side of ``seed``'s (the best of its setup meeting the
    targets; ``setup``: its points) whose gap to it could hold a point passing ``top``, None
    for a side that cannot or is under two batches wide. A step takes no less time at a
    larger batch, so a batch ``y`` above a timed ``x`` gives at most ``key(x) y / x``: the gap
    above ``seed``'s batch ``b`` up to ``hi`` holds at most ``key(seed) hi / b``, the one below
    from ``lo`` at most ``key(lo) b / lo`` (``lo``'s best point, missing the targets or not)."""
    b = seed["batch_per_group"]
    at: dict[int, float] = {}
    for p in setup:
        x = p["batch_per_group"]
        at[x] = max(at.get(x, 0.0), best_key(p, budget))
    lo = max((x for x in at if x < b), default=None)
    hi = min((x for x in at if x > b), default=None)
    if lo is not None and (b - lo < 2 or at[lo] * b / lo < top):
        lo = None
    if hi is not None and (hi - b < 2 or best_key(seed, budget) * hi / b < top):
        hi = None
    return lo, hi


def refine(
    req: SearchRequest,
    best: dict[str, Any],
    pools: dict[Any, list[Any]],
    found: Points,
    edges: tuple[int | None, int | None] | None = None,
) -> None:
    """:func:`refine_all` of one point, ``edges`` the batches on each side of it instead of
    the searched ones next to it (None: those)."""
    refine_all(req, [best], pools, found, edges)


def refine_all(
    req: SearchRequest,
    seeds: list[dict[str, Any]],
    pools: dict[Any, list[Any]],
    found: Points,
    edges: tuple[int | None, int | None] | None = None,
) -> None:
    """:func:`refine_batches` of each seed, their candidates timed together (one
    :func:`time_candidates` call: a 64-GPU search of deepseek-v3 refined 87 seeds of one
    candidate each, its kernel classes timed 87 times over), their points joining ``found``
    in the seeds' order."""
    asked = [refine_batches(req, seed, edges) for seed in seeds]
    asked = [(seed, *a) for seed, a in zip(seeds, asked, strict=True) if a is not None]
    if not asked:
        return
    secs = time_candidates([c for _, _, cands in asked for c in cands], req.profile)
    start = 0
    for best, sub, cands in asked:
        mine, start = secs[start : start + len(cands)], start + len(cands)
        more = evaluate(sub, cands, mine, pools, Counter())
        for point, models in zip(more.points, more.models):
            if best["mode"] == point["mode"]:
                found.add(point, *models)
                if id(point) in more.pending:
                    found.pending[id(point)] = more.pending[id(point)]


def refine_batches(
    req: SearchRequest, best: dict[str, Any], edges: tuple[int | None, int | None] | None
) -> tuple[SearchRequest, list[Any]] | None:
    """The request and candidates of :func:`refine_all` for one point (None: no batch to
    try). Batches between the searched ones next to the best point's (whole numbers, at most
    :data:`REFINE_POINTS` on each side, spaced evenly in ratio; none below the first searched
    batch, and beyond the last up to twice it where the best is there) for the best point's decode
    layout, dtypes and overlap, its prefill pools as before; their points join ``found``.
    The targets are met or missed between two searched batches, so the best batch meeting
    them lies in that gap. ``edges``: the batches on each side instead (None: none)."""
    b = best["batch_per_group"]
    lo = max((x for x in req.batches if x < b), default=None)
    hi = min((x for x in req.batches if x > b), default=None)
    if edges is not None:
        lo, hi = edges
    elif hi is None and b >= max(req.batches) and b < MAX_BATCH:
        # the best at the grid's largest batch: the targets may hold beyond it (a new-user
        # trial's gpt-oss-120b on GB200: batch 1024 best, 1100 met them with 3.9% more)
        hi = min(2 * b, MAX_BATCH)
    grid = set()
    for edge in (lo, hi):
        if edge is None:  # the best is at an end of the searched batches: nothing beyond
            continue
        a, z = sorted((b, edge))
        if z - a < 2:
            continue
        ratios = np.geomspace(a, z, REFINE_POINTS + 2)[1:-1]
        grid |= {round(float(r)) for r in ratios} - {a, z}
    grid = {x for x in grid if 1 <= x <= MAX_BATCH}
    if not grid:
        return None
    sub = dataclasses.replace(req, batches=tuple(sorted(grid)), overlaps=(best["overlap"],))
    lay_key = (best["tp"], best["dp"], best["pp"], best["ep"], best["dp_attention"])

    # the components' part of the best's weight choice
    best_key = weight_key("", tuple(sorted((best.get("component_dtypes") or {}).items())))

    def keep(g: int, w: str, lay: Any, kv: str) -> bool:
        key = (lay.tp, lay.dp, lay.pp, lay.ep, lay.dp_attention)
        w0, _, comps = w.partition("+")
        base = weight_format(req.m, None if req.own and w0 == req.m.weights_dtype else w0)
        return (
            g == best["decode_gpus"]
            and key == lay_key
            and lay.redundant_experts == best["redundant_experts"]
            and resolve_kv_layout(kv).name == best["kv_dtype"]
            and best["weight_format"].startswith(base)
            and ("+" + comps if comps else "") == best_key
        )

    # only the best's decode GPU count is laid out again; the pairing sees every count
    cands = candidates(dataclasses.replace(sub, gpus=(best["decode_gpus"],)), Counter(), keep)
    cands = [dataclasses.replace(c, overlaps=(best["overlap"],)) for c in cands]
    return sub, cands


def _edge_note(
    req: SearchRequest, best: dict[str, Any] | None, points: list[dict[str, Any]]
) -> tuple[str, ...]:
    """Where the best is the largest batch searched for its deployment and a larger one
    fits: the targets may hold beyond it (say so, and how to search further)."""
    if best is None:
        return ()
    same = ("mode", "decode_gpus", "layout", "weight_format", "kv_dtype", "overlap")
    largest = max(p["batch_per_group"] for p in points if all(p[k] == best[k] for k in same))
    b = best["batch_per_group"]
    shared = best.get("kv_shared_prefix_bytes", 0)  # a shared prefix's, held once per group
    per_seq = (best["kv_per_gpu_bytes"] - shared) // max(b, 1)
    fit = max(req.room(best["weights_per_gpu_bytes"]) - shared, 0) // per_seq if per_seq else b
    if b < largest or fit <= b:
        return ()
    head = (
        f"the best is the largest batch searched for its deployment ({b:,} per group; {fit:,} fit)"
    )
    above = sorted(x for x in req.batches if b < x <= fit)
    if above:  # asked, and none of them became a point: a wider list would change nothing
        # (a trial was told to search --batches 1,...,1024, the list it had searched)
        return (
            f"{head}: the larger batches asked that fit ({', '.join(f'{x:,}' for x in above)}) "
            "were ruled out for it before timing (the candidates ruled out say why)",
        )
    wider = ",".join(str(x) for x in sorted({*req.batches, min(fit, 2 * b), min(fit, 4 * b)}))
    return (
        f"{head}: a larger batch may meet the targets with more tokens/s; search larger ones "
        f"with batches= (--batches {wider})",
    )


def _notes(req: SearchRequest) -> tuple[str, ...]:
    """What the search says of the request beside its points: a context beyond the model's;
    for a list of GPU counts searched disaggregated, that its pools are of those counts only."""
    out = []
    limit = req.m.max_position_embeddings
    if limit and req.context > limit:
        out.append(
            f"context {req.context:,} exceeds the model's max_position_embeddings ({limit:,})"
        )
    if req.budget is None and "disaggregated" in req.modes:
        out.append(list_pools_note(req.gpus))
    return tuple(out)


#: The most GPUs :func:`_weights_note` tries, doubling the largest count searched
WEIGHTS_NOTE_MAX_GPUS = 4096


def _weights_note(req: SearchRequest, ruled_out: dict[str, int]) -> tuple[str, ...]:
    """Where the weights fit on no layout of any count searched: the smallest count, the
    largest searched doubled until one fits, that holds them in some dtype tried (a new-user
    trial's 'does not fit: weights 88 points' for GLM-5.1 on 4 H200 said nothing more)."""
    if set(ruled_out) != {"does not fit: weights"}:  # something fitted, or failed otherwise
        return ()
    largest = max(req.gpus)
    counts = ", ".join(f"{c:,}" for c in sorted(set(req.gpus)))
    g = 2 * largest
    while g <= WEIGHTS_NOTE_MAX_GPUS:
        for w0 in req.weight_dtypes:
            sized = None if req.own and w0 == req.m.weights_dtype else w0
            for comps in req.components:
                if req.layouts(g, sized, comps):
                    return (
                        f"the weights fit on no layout of the GPU counts searched ({counts}); "
                        f"{g:,} GPUs (--gpus {g}), the largest count doubled, hold them "
                        f"(weights {weight_key(w0, comps)})",
                    )
        g *= 2
    return (f"the weights fit on no layout of up to {WEIGHTS_NOTE_MAX_GPUS:,} GPUs",)


def list_pools_note(gpus: tuple[int, ...]) -> str:
    """What a list of GPU counts means for disaggregated points (each pool one of the counts,
    both within the largest), and what to give for pools of any size (one count: a budget)."""
    largest, smallest = max(gpus), min(gpus)
    counts = ", ".join(str(g) for g in sorted(gpus))
    words = (
        f"disaggregated: a list of GPU counts ({counts}) pairs a decode and a prefill pool of "
        f"those counts only, both within the largest ({largest})"
    )
    if 2 * smallest > largest:
        words += f", and no two fit ({smallest} + {smallest} > {largest}): none was paired"
    return (
        words
        + f"; one count, {largest} (--gpus {largest}), is a budget split between pools of any size"
    )
