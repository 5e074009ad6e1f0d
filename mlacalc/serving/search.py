"""Search deployments: layouts x batch sizes x dtypes x aggregated/disaggregated.

For each GPU count, every layout that divides the model (tensor parallel within a node, data
parallel beyond; pipeline stages for models that do not fit otherwise; expert parallel and
DP-attention for MoE models, with redundant experts where the GPU count does not divide the
experts), each weight and KV dtype, with and without two-batch overlap, is evaluated at every
batch size that fits, in steady state at the given input and output lengths, the way
:func:`mlacalc.plan` evaluates one deployment (the decode steps of all batch sizes of a layout
in one vectorised call). Disaggregated points pair the decode pool with every prefill pool (of
the same GPU counts, both pools within the largest count, reported with the point) whose prompt
rate keeps up and that holds its weights and one prompt's cache, its passes capped at the
prompts whose cache fits beside the weights (as :func:`mlacalc.plan` checks a pool): per GPU
count, dtypes and overlap, every layout that no other beats on both prompts per second (at its
largest pass) and the time of a one-prompt pass ``t_pf[1]`` (the Pareto set: the most prompts
per second keeps up with the most decode, a shorter pass a shorter TTFT), each pairing a point.
As :func:`mlacalc.plan` has it, a prefill group runs passes of the smallest size ``k`` that
keeps up with its prompts (``k / t_pf[k] >=`` the prompts/s on it), and a prompt waits for the
pass in progress (``rho t_pf[k] / 2``, ``rho`` the share of the time a pass runs), then its own
pass, then the KV transfer (a point equals ``plan`` of its deployment, prefill pool layout
included, at its concurrency). A disaggregated point is a decode batch; its concurrency is the
requests in flight that keep that many decoding: the batch plus, at its request rate, those in
the prefill pool and the KV transfer (Little's law), as ``plan``'s closed loop counts them.

The result has every point with its figures (output tokens/s per GPU and per user, TTFT,
TPOT), the Pareto frontier of tokens/s per GPU against tokens/s per user, the best point that
meets the latency targets (most tokens/s per GPU), and for the others why they lose: does not
fit, misses TTFT, misses TPOT, or is beaten on both axes by a frontier point.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlacalc.cost.engine import as_model as _model
from mlacalc.cost.engine import kv_cache
from mlacalc.hardware.catalogue import HardwareSpec, load_hardware
from mlacalc.models.loading import ModelConfig
from mlacalc.serving.comm import kv_transfer_seconds
from mlacalc.serving.gpu_step import StepModel, time_jobs
from mlacalc.serving.layout import (
    Layout,
    kv_bytes_per_sequence_per_gpu,
    make_layout,
    weight_format,
    weights_per_gpu,
)
from mlacalc.words.arguments import MAX_BATCH, count, one_or_many
from mlacalc.words.dtypes import canonical_dtype, resolve_kv_layout
from mlacalc.words.errors import InvalidArgumentError, MlacalcError, UnknownDtypeError

__all__ = ["BATCHES", "SearchResult", "search"]

#: Running sequences per attention group that the search tries.
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
#: Prompt tokens one prefill pass batches on an attention group (as :mod:`mlacalc.serving.plan`).
PREFILL_TOKENS = 16384

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
    "kv_dtype",
    "batch_per_group",
    "concurrency",
    "ttft_s",
    "tpot_s",
    "output_tokens_per_s",
    "output_tokens_per_s_per_gpu",
    "output_tokens_per_s_per_user",
    "weights_per_gpu_bytes",
    "kv_per_gpu_bytes",
    "fits",
    "meets_targets",
    "on_frontier",
    "reason",
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
    #: how the best point's own kernels were predicted (its decode step and its prompts'
    #: prefill, as :attr:`mlacalc.Plan.calibration` of its plan says it)
    best_calibration: str = ""

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "hardware": self.hardware,
            "isl": self.isl,
            "osl": self.osl,
            "ttft_target_s": self.ttft_target_s,
            "tpot_target_s": self.tpot_target_s,
            "best": self.best,
            "frontier": self.frontier,
            "reasons": dict(self.reasons),
            "point_reasons": self.point_reasons,
            "ruled_out": dict(self.ruled_out),
            "points_missing_both_targets": self.missing_both,
            "layouts": self.layouts,
            "points": len(self.points),
            "seconds": self.seconds,
            "notes": list(self.notes),
            "prefill_pass": self.prefill_pass,
            "output_lag_steps": self.output_lag_steps,
            "profile": self.profile,
            "calibration": self.calibration,
            "best_calibration": self.best_calibration,
            "memory_reserve": self.memory_reserve,
            "page_size": self.page_size,
        }

    def row(self, p: dict[str, Any]) -> dict[str, Any]:
        """One point as a flat record, with the profile that timed it."""
        return {
            **{k: p.get(k) for k in FIELDS},
            "profile": self.profile,
            "calibration": self.calibration,
        }

    def rows(self) -> list[dict[str, Any]]:
        """Every point as a flat record (for CSV and notebooks)."""
        return [self.row(p) for p in self.points]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _layouts(
    m: ModelConfig, hw: HardwareSpec, gpus: int, weight_dtype: str | None, usable: int
) -> list[Layout]:
    """The layouts worth trying on ``gpus`` GPUs (see the module docstring)."""
    node = hw.gpus_per_node or gpus
    out: list[Layout] = []
    seen = set()

    def add(**kw: Any) -> None:
        try:
            lay = make_layout(m, gpus, **kw)
        except MlacalcError:
            return
        key = (lay.tp, lay.dp, lay.pp, lay.ep, lay.dp_attention, lay.redundant_experts)
        if key not in seen:
            seen.add(key)
            out.append(lay)

    tps = [t for t in _divisors(gpus) if t <= node and m.num_attention_heads % t == 0]
    for tp in tps:
        add(tp=tp)
        if m.is_moe:
            if tp > 1:
                add(tp=tp, ep=tp)
            for ep in (gpus,):
                slots = m.n_routed_experts
                extra = (-slots) % ep
                add(tp=tp, ep=ep, dp_attention=True, redundant_experts=extra)
                add(tp=tp, ep=ep, redundant_experts=extra)
            add(tp=tp, dp_attention=True)
    for pp in (2, 4, 8):
        if gpus % pp == 0 and gpus // pp >= 1:
            stage = gpus // pp
            tp = max(t for t in _divisors(stage) if t <= node and m.num_attention_heads % t == 0)
            add(tp=tp, pp=pp)
    return [lay for lay in out if weights_per_gpu(m, lay, weight_dtype) < usable]


def _needs_network(lay: Layout, hw: HardwareSpec) -> bool:
    """Whether some collective or stage hand-over of the layout crosses nodes."""
    node = hw.gpus_per_node
    if node is None or lay.gpus <= node:
        return False
    return lay.tp > node or lay.moe_group > node or (lay.pp > 1 and lay.stage_gpus >= node)


def _pareto(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
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
    memory_reserve: float = 0.1,
    page_size: int = 16,
    prefill_pass: str = "fused",
    output_lag_steps: int = 0,
    profile: Any = None,
) -> SearchResult:
    """Explore deployments of ``model`` on ``gpus`` (each count a separate option) for requests of
    ``isl`` prompt and ``osl`` output tokens; ``ttft`` and ``tpot`` (seconds) are the targets.
    ``prefill_pass`` and ``output_lag_steps`` describe the engine of the aggregated points as
    :func:`mlacalc.plan` does: prompts in the decode batch's pass (``"fused"``) or in a pass of
    their own before it (``"separate"``), and the steps a token waits before it is read back.

    Examples
    --------
    >>> r = search("llama-3-8b", "H100-SXM", [1, 2], isl=1000, osl=200, tpot=0.02)
    >>> r.best["tpot_s"] <= 0.02 and r.best["fits"]
    True
    """
    import time

    t0 = time.perf_counter()
    m = _model(model)
    hw = load_hardware(hardware)
    # a list-valued option given one value (a str is one dtype, not its characters) is a list
    # of one; an empty list is refused (it would search nothing and say nothing)
    gpus = one_or_many("gpus", gpus, what="GPU counts")
    kv_dtypes = one_or_many("kv_dtypes", kv_dtypes, what="KV dtypes")
    modes = one_or_many("modes", modes, what="modes (aggregated, disaggregated)")
    overlaps = one_or_many("overlaps", overlaps, what="overlaps (none, tbo)")
    if weight_dtypes is not None:
        weight_dtypes = one_or_many("weight_dtypes", weight_dtypes, what="weight dtypes")
    batches = tuple(
        count("batches", b, MAX_BATCH) for b in one_or_many("batches", batches, what="batch sizes")
    )
    for overlap in overlaps:
        if overlap not in ("none", "tbo"):
            raise InvalidArgumentError("overlaps", f"unknown overlap {overlap!r}; use none or tbo")
    if not gpus or any(isinstance(g, bool) or not isinstance(g, int) or g <= 0 for g in gpus):
        raise InvalidArgumentError("gpus", f"must be positive integers, got {gpus!r}")
    for name, value in (("isl", isl), ("osl", osl)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InvalidArgumentError(name, f"must be a positive integer, got {value!r}")
    for name, value in (("ttft", ttft), ("tpot", tpot)):
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value <= 0
        ):
            raise InvalidArgumentError(name, f"must be a positive number of seconds, got {value!r}")
    for mode in modes:
        if mode not in ("aggregated", "disaggregated"):
            raise InvalidArgumentError(
                "modes", f"unknown mode {mode!r}; use aggregated or disaggregated"
            )
    if prefill_pass not in ("fused", "separate"):
        raise InvalidArgumentError(
            "prefill_pass", f"must be one of fused, separate, got {prefill_pass!r}"
        )
    if (
        isinstance(output_lag_steps, bool)
        or not isinstance(output_lag_steps, int)
        or output_lag_steps < 0
    ):
        raise InvalidArgumentError(
            "output_lag_steps", f"must be a whole number of steps >= 0, got {output_lag_steps!r}"
        )
    if not 0 <= memory_reserve < 1:
        raise InvalidArgumentError(
            "memory_reserve", f"must be a fraction in [0, 1), got {memory_reserve!r}"
        )
    # an unknown dtype names the argument (the option) it came in
    for name, values, check in (
        ("weight_dtypes", weight_dtypes or (), canonical_dtype),
        ("kv_dtypes", kv_dtypes, resolve_kv_layout),
    ):
        for value in values:
            try:
                check(value)
            except UnknownDtypeError as exc:
                raise UnknownDtypeError(exc.name, exc.known, exc.what, name) from None
    own = weight_dtypes is None  # the model's own weights are sized as its checkpoint stores them
    if weight_dtypes is None:
        weight_dtypes = (m.weights_dtype,)
        if canonical_dtype(m.weights_dtype) in ("bf16", "fp16") and "fp8" in hw.peak_flops_per_s:
            weight_dtypes += ("fp8",)
    usable = int(hw.memory_bytes * (1 - memory_reserve))
    context = isl + osl
    S_avg = isl + osl / 2
    notes = []
    if m.max_position_embeddings and context > m.max_position_embeddings:
        notes.append(
            f"context {context:,} exceeds the model's max_position_embeddings "
            f"({m.max_position_embeddings:,})"
        )
    B = np.asarray(batches, dtype=np.float64)
    k_max = max(1, PREFILL_TOKENS // isl)
    from mlacalc.serving.disaggregated import prefill_pool_seconds
    from mlacalc.serving.provenance import calibration_of
    from mlacalc.timemodel.profile import load_profile

    profile = load_profile(profile)
    points: list[dict[str, Any]] = []
    reasons: Counter[str] = Counter()
    n_layouts = 0
    # ---- every step of every candidate as rows of one spec list per step model
    jobs: list[tuple[StepModel, list]] = []
    plans: list[dict[str, Any]] = []
    for g in gpus:
        for w in weight_dtypes:
            sized = None if own and w == m.weights_dtype else w  # None: checkpoint bytes
            lays = _layouts(m, hw, g, sized, usable)
            if not lays:
                reasons["does not fit: weights"] += len(kv_dtypes) * len(batches) * len(modes)
                continue
            if not hw.scale_out_bytes_per_s:
                crossing = [lay for lay in lays if _needs_network(lay, hw)]
                if crossing:
                    reasons[f"{hw.name} has no network figures (scale_out_gb_per_s)"] += (
                        len(crossing) * len(kv_dtypes) * len(batches) * len(modes)
                    )
                    lays = [lay for lay in lays if not _needs_network(lay, hw)]
            for lay in lays:
                weights = weights_per_gpu(m, lay, sized)
                for kv in kv_dtypes:
                    layout = resolve_kv_layout(kv)
                    # one sequence's cache on a GPU, every layer kind as it keeps it, in pages
                    per_seq = kv_bytes_per_sequence_per_gpu(m, layout, lay, context, page_size)
                    per_group = (usable - weights) // per_seq
                    fit = per_group >= B
                    reasons["does not fit: kv cache"] += int((~fit).sum()) * len(modes)
                    Bf = B[fit]
                    comm = lay.tp > 1 or lay.ep > 1 or lay.moe_group > lay.tp or lay.pp > 1
                    ovs = [o for o in overlaps if comm or o == "none"]
                    n = Bf / osl
                    k = np.clip(np.ceil(n - 1e-9), 1, k_max)
                    dec_B, pf_N, pf_q, slices = [], [], [], {}
                    pos = 0
                    for ov in ovs:
                        f = 0.5 if ov == "tbo" else 1.0
                        rows = [("dec", Bf, 0 * Bf), ("mix", Bf, k)]
                        if prefill_pass == "separate":  # the prompts' own pass
                            rows[1] = ("mix", 0 * Bf, k)
                        for what, db, pn in rows:
                            mb = np.minimum(lay.pp, np.maximum(db, 1))  # micro-batches
                            dec_B.append(db / mb * f)
                            pf_N.append(pn / mb * f)
                            pf_q.append(np.full(len(Bf), float(isl)))
                            slices[(ov, what)] = slice(pos, pos + len(Bf))
                            pos += len(Bf)
                    # a prefill pool holds the weights and the cache of one prompt of isl
                    # tokens per GPU at least, and a pass batches at most the prompts whose
                    # cache fits beside the weights (k_fit <= k_max), as plan checks it
                    k_fit = 0
                    if lay.pp == 1 and "disaggregated" in modes:
                        one = kv_bytes_per_sequence_per_gpu(m, layout, lay, isl, page_size)
                        k_fit = int(min(k_max, max(usable - weights, 0) // one))
                    if k_fit >= 1:
                        # the layout as a prefill pool: its passes of 1 .. k_fit prompts
                        # (its prompt rate: a pass of k_fit), under each overlap (a pool runs
                        # its decode pool's, as plan times it)
                        for ov in overlaps:
                            f = 0.5 if ov == "tbo" else 1.0
                            dec_B.append(np.zeros(k_fit))
                            pf_N.append(np.arange(1.0, k_fit + 1) * f)
                            pf_q.append(np.full(k_fit, float(isl)))
                            slices[(ov, "prefill")] = slice(pos, pos + k_fit)
                            pos += k_fit
                    if not sum(len(x) for x in dec_B):
                        continue  # no batch fits and no prefill pool to rate: nothing to time
                    sm = StepModel(m, lay, sized, layout, hw, profile)
                    specs = sm.specs(
                        dec_B=np.concatenate(dec_B),
                        dec_S=S_avg,
                        pf_N=np.concatenate(pf_N),
                        pf_q=np.concatenate(pf_q),
                    )
                    jobs.append((sm, specs))
                    plans.append(
                        {
                            "g": g,
                            "w": w,
                            "label": weight_format(m, sized),
                            "lay": lay,
                            "kv": layout.name,
                            "kv_layout": layout,
                            "weights": weights,
                            "per_seq": per_seq,
                            "Bf": Bf,
                            "k": k,
                            "n": n,
                            "ovs": ovs,
                            "slices": slices,
                            "k_fit": k_fit,
                        }
                    )
    secs = time_jobs(jobs, profile)
    profile_name, calibration = calibration_of(
        profile, hw, {(sp.kind, sp.dtype) for _, specs in jobs for sp in specs if sp.calls}
    )
    # ---- prefill pools: per GPU count, weight and KV dtype and overlap, every layout that no
    # other beats on both prompts/s and a one-prompt pass t_pf[1] (the Pareto set: the most
    # prompts/s keeps up with the most decode, a short pass gives the shortest TTFT); each
    # pool's prompts/s, t_pf[k] (a pass of k prompts) and layout, which the points report so
    # that plan reproduces them
    rated: dict[tuple[int, str, str, str], list[tuple[float, np.ndarray, StepModel]]] = {}
    for (sm, specs), t, pl in zip(jobs, secs, plans):
        for ov in overlaps:
            sl = pl["slices"].get((ov, "prefill"))
            if sl is None:
                continue
            t_pf = np.concatenate([[0.0], sm.compose(specs, t, ov, sl, breakdown=False).seconds])
            k_fit = pl["k_fit"]  # the largest pass whose cache fits (plan's k_max)
            rate = pl["lay"].dp * k_fit / t_pf[k_fit]
            rated.setdefault((pl["g"], pl["w"], pl["kv"], ov), []).append((float(rate), t_pf, sm))
    # per key, its pools (most prompts/s first): prompts/s, t_pf[0 .. k_fit] and step model
    # (its layout)
    pools: dict[tuple[int, str, str, str], list[tuple[float, np.ndarray, StepModel]]]
    pools = {}
    for key, cands in rated.items():
        best_t1 = math.inf
        # most prompts/s first (the shorter pass first among equals): a layout joins the set
        # when its one-prompt pass is shorter than every faster layout's
        for rate, t_pf, sm in sorted(cands, key=lambda c: (-c[0], c[1][1])):
            if t_pf[1] < best_t1:
                pools.setdefault(key, []).append((rate, t_pf, sm))
                best_t1 = t_pf[1]
    pool_fields = {
        id(pool): {
            "prefill_layout": pool[2].lay.describe(),
            "prefill_tp": pool[2].lay.tp,
            "prefill_ep": pool[2].lay.ep,
            "prefill_dp_attention": pool[2].lay.dp_attention,
            "prefill_redundant_experts": pool[2].lay.redundant_experts,
        }
        for pools_of_key in pools.values()
        for pool in pools_of_key
    }
    largest = max(gpus)
    # each point's step models (its decode pool's, the one that runs its prompts), by index
    models: dict[int, tuple[StepModel, StepModel]] = {}
    for (sm, specs), t, pl in zip(jobs, secs, plans):
        lay, g, Bf = pl["lay"], pl["g"], pl["Bf"]
        if not len(Bf):
            continue
        context_bytes = (Bf * pl["per_seq"]).astype(np.int64)
        for ov in pl["ovs"]:
            n_layouts += 1
            t_step = (
                lay.pp * sm.compose(specs, t, ov, pl["slices"][(ov, "dec")], False).stage_seconds
            )
            base = {
                "layout": lay.describe(),
                "tp": lay.tp,
                "dp": lay.dp,
                "pp": lay.pp,
                "ep": lay.ep,
                "redundant_experts": lay.redundant_experts,
                "dp_attention": lay.dp_attention,
                "overlap": ov,
                "weight_dtype": pl["label"],
                "kv_dtype": pl["kv"],
                "weights_per_gpu_bytes": pl["weights"],
                "fits": True,
            }
            if "aggregated" in modes:
                mix = sm.compose(specs, t, ov, pl["slices"][(ov, "mix")], False)
                t_mix = lay.pp * mix.stage_seconds
                if prefill_pass == "separate":  # the prompts' pass, then the decode pass
                    t_mix = t_step + mix.seconds
                share = np.minimum(pl["n"] / pl["k"], 1.0)
                cycle = (1 - share) * t_step + share * t_mix
                ttft_s = t_step / 2 + t_mix + output_lag_steps * cycle
                total = lay.dp * Bf / cycle
                for i, b in enumerate(Bf):
                    models[len(points)] = (sm, sm)
                    points.append(
                        {
                            **base,
                            "gpus": g,
                            "mode": "aggregated",
                            "decode_gpus": g,
                            "prefill_gpus": 0,
                            "batch_per_group": int(b),
                            "concurrency": int(b * lay.dp),
                            "ttft_s": float(ttft_s[i]),
                            "tpot_s": float(cycle[i]),
                            "output_tokens_per_s": float(total[i]),
                            "output_tokens_per_s_per_gpu": float(total[i]) / g,
                            "output_tokens_per_s_per_user": 1.0 / float(cycle[i]),
                            "kv_per_gpu_bytes": int(context_bytes[i]),
                        }
                    )
            if "disaggregated" in modes:
                total = lay.dp * Bf / t_step
                demand = total / osl  # prompts per second
                row = kv_cache(m, isl, 1, pl["kv_layout"], None, False).total_bytes
                transfer = kv_transfer_seconds(hw, row)
                # every prefill pool (of the GPU counts given, each of its Pareto set of
                # layouts) that keeps up, each a point, timed as plan times it (see plan's
                # module docstring): the smallest pass that keeps up with the prompts on a
                # prefill group, and the wait for the pass in progress (rho t_pf / 2)
                pairs = []
                settled = np.zeros(len(Bf), dtype=bool)  # batches only a smaller one holds
                for pg in sorted(gpus):
                    if g + pg > largest:
                        continue
                    for pool in pools.get((pg, pl["w"], pl["kv"], ov), ()):
                        rate, t_pf, p_sm = pool
                        keeps = rate >= demand
                        if not keeps.any():
                            continue
                        ttft_s = prefill_pool_seconds(t_pf, demand / p_sm.lay.dp) + transfer
                        # the requests in flight: the decode batch and, at the request rate,
                        # those in the prefill pool and the KV transfer (Little's law), as
                        # plan's closed loop counts them
                        in_flight = lay.dp * Bf + demand * ttft_s
                        # a batch whose requests in flight a smaller batch already reaches is
                        # no steady state of the closed loop: with that many users it settles
                        # at the smaller batch, as plan solves it (near a larger pass, the
                        # shorter wait can hold fewer requests in flight at a larger batch)
                        record = in_flight > np.concatenate(
                            [[-np.inf], np.maximum.accumulate(in_flight)[:-1]]
                        )
                        settles = keeps & ~record
                        keeps = keeps & record
                        head = {
                            **base,
                            "mode": "disaggregated",
                            "gpus": g + pg,
                            "decode_gpus": g,
                            "prefill_gpus": pg,
                            **pool_fields[id(pool)],
                        }
                        pairs.append(
                            (g + pg, keeps.tolist(), ttft_s.tolist(), p_sm, head, in_flight)
                        )
                        settled |= settles
                # per batch size: its figures as Python numbers, then one point per pool
                tps, tots = t_step.tolist(), total.tolist()
                kvs = context_bytes.tolist()
                for i, b in enumerate(Bf.tolist()):
                    found = False
                    for gpus_used, keeps, ttft_s, p_sm, head, in_flight in pairs:
                        if not keeps[i]:
                            continue
                        found = True
                        models[len(points)] = (sm, p_sm)
                        points.append(
                            {
                                **head,
                                "batch_per_group": int(b),
                                "concurrency": float(in_flight[i]),
                                "ttft_s": ttft_s[i],
                                "tpot_s": tps[i],
                                "output_tokens_per_s": tots[i],
                                "output_tokens_per_s_per_gpu": tots[i] / gpus_used,
                                "output_tokens_per_s_per_user": 1.0 / tps[i],
                                "kv_per_gpu_bytes": kvs[i],
                            }
                        )
                    if not found and settled[i]:
                        reasons[
                            "disaggregated: its requests in flight settle at a smaller batch"
                        ] += 1
                    elif not found:
                        reasons["disaggregated: no prefill pool keeps up within the GPUs"] += 1
    ruled_out = {k: v for k, v in reasons.items() if v}
    for p in points:
        misses = []
        if ttft is not None and p["ttft_s"] > ttft:
            misses.append("misses TTFT")
        if tpot is not None and p["tpot_s"] > tpot:
            misses.append("misses TPOT")
        p["meets_targets"] = not misses
        p["reason"] = ", ".join(misses)
    front = _pareto(points)
    front_ids = {id(p) for p in front}
    meeting = [p for p in points if p["meets_targets"]]
    best = max(  # of equals (a decode point with several prefill layouts), the shortest TTFT
        meeting,
        key=lambda p: (
            p["output_tokens_per_s_per_gpu"],
            p["output_tokens_per_s_per_user"],
            -p["ttft_s"],
        ),
        default=None,
    )
    best_calibration = ""
    if best is not None:
        # the best point's own kernel classes, as plan of it describes them: its decode step
        # and one prompt's prefill on the GPUs that run it
        dec_sm, pf_sm = models[next(i for i, p in enumerate(points) if p is best)]
        b, pp_b = float(best["batch_per_group"]), dec_sm.lay.pp
        kernels = [
            *dec_sm.step(
                overlap=best["overlap"], dec_B=b / min(pp_b, b), dec_q=1, dec_S=S_avg
            ).kernels,
            *pf_sm.step(pf_N=1, pf_q=isl).kernels,
        ]
        best_calibration = calibration_of(profile, hw, kernels)[1]
    for p in points:
        p["on_frontier"] = id(p) in front_ids
        if p is best:
            p["reason"] = "best"
        elif not p["reason"]:
            p["reason"] = (
                "on the frontier, fewer tokens/s per GPU than the best"
                if p["on_frontier"]
                else "beaten on tokens/s per GPU and per user by a frontier point"
            )
        reasons[p["reason"].split(",")[0] if p is not best else "best"] += 1
    return SearchResult(
        model=m.name,
        hardware=hw.name,
        isl=isl,
        osl=osl,
        ttft_target_s=ttft,
        tpot_target_s=tpot,
        points=points,
        frontier=[dict(p) for p in front],
        best=dict(best) if best else None,
        reasons=dict(reasons),
        layouts=n_layouts,
        seconds=time.perf_counter() - t0,
        notes=tuple(notes),
        prefill_pass=prefill_pass,
        output_lag_steps=output_lag_steps,
        ruled_out=ruled_out,
        profile=profile_name,
        calibration=calibration,
        memory_reserve=memory_reserve,
        page_size=page_size,
        best_calibration=best_calibration,
    )
