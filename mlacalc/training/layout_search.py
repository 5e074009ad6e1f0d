"""Which training layouts fit a number of GPUs, and which is fastest (:func:`training_search`).

The search enumerates the layouts of ``gpus`` GPUs (tensor, context, pipeline, data and expert
parallel ranks, interleaved virtual stages, ZeRO stage, recompute policy, micro-batch) for one
model, sequence length and global batch, prices each with
:func:`mlacalc.training.cost.training_cost` (the function ``mlacalc train`` prints: no second
model), keeps those whose share fits a GPU's usable memory and ranks them by step time (at a
fixed global batch, the same order as tokens a second). Pruning before pricing, each exact
under the cost function's accounting:

- divisibility: ``tp`` within the device's scale-up domain (its NVLink node or rack) and
  dividing the heads; ``2 cp`` dividing the sequence; ``pp`` at most the layers; ``dp``
  dividing the global batch (``cp`` 1 under materialized attention, the absorbed path's);
  ``ep`` dividing the experts and the ``dp x cp x tp`` ranks; the
  micro-batch dividing a rank's sequences; ``pp x v`` dividing the layers and ``pp`` the
  micro-batches under the interleaved schedule. What fails these is not a layout, not counted.
- weights and states: a layout's memory is at least a stage's weights, gradients and
  optimizer states, which no recompute policy or micro-batch changes; each parallel shape and
  ZeRO stage is priced first at its least activations (the last recompute policy searched,
  ``full`` by default, and the smallest micro-batch), and where the busiest stage's states
  alone are over, every policy and micro-batch of it is counted as not fitting on the
  weights and states (:data:`STATES`) on that one pricing. A layout over otherwise is
  counted on the activations (:data:`ACTIVATIONS`).
- micro-batch: a stage holds ``min(pp - s, m) x b`` sequences' activations in flight under
  1F1B (``m`` micro-batches of ``b``: ``min((pp - s) b, m b)``, non-decreasing in ``b``), so
  micro-batches are priced smallest first and the first that does not fit ends that policy's
  row, the larger ones counted as not fitting on the activations.

The tests price the whole space without pruning on small cases and compare the ranking and the
counts (``tests/test_training_search.py``); ``benchmarks/bench_training_search.py`` times a
64-GPU search.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from mlacalc.hardware.catalogue import HardwareSpec, load_hardware
from mlacalc.models.loading import ModelConfig, model_argument
from mlacalc.render import human_bytes
from mlacalc.serving.layout import kv_heads_unsplit
from mlacalc.serving.plan_checks import check_number, usable_of
from mlacalc.training import flops, step
from mlacalc.training.cost import TrainingCost, training_cost
from mlacalc.training.flops import RECOMPUTE_POLICIES, default_attention
from mlacalc.training.step import expert_dp, make_layout
from mlacalc.words import arguments as args
from mlacalc.words import defaults as D
from mlacalc.words.errors import InvalidArgumentError, MlacalcError

__all__ = ["ACTIVATIONS", "STATES", "TrainingSearch", "bound_of", "training_search"]

#: the reasons a layout does not fit (``TrainingSearch.not_fit``'s keys; a layout the cost
#: function refuses is counted under ``"refused (FIELD)"``)
STATES = "weights and optimizer states"
ACTIVATIONS = "activations"
#: the settings of training_cost a search holds fixed (the rest it searches)
_FIXED = frozenset(
    {"impl", "optimizer", "precision", "overlap", "comm_sms", "memory_reserve", "swiglu",
     "lora_rank", "lora_targets", "base_dtype", "profile", "attention", "schedule"}
)  # fmt: skip
_MAX_GPUS = 1 << 20
_ZERO = (0, 1, 2, 3)


@dataclass(frozen=True)
class TrainingSearch:
    """What a layout search found: the fastest layouts that fit (``ranked``, fastest first,
    at most ``top``), how many layouts it tried, how many fit and why the others did not."""

    model: str
    hardware: str
    gpus: tuple[int, ...]
    seq_len: int
    global_batch: int
    ranked: tuple[TrainingCost, ...]
    #: layouts in the space (after divisibility), fitting or not
    tried: int
    #: of them, those whose share fits a GPU's usable memory (each timed)
    fitted: int
    #: the others, by reason: :data:`STATES`, :data:`ACTIVATIONS`, ``"refused (FIELD)"``
    not_fit: dict[str, int]
    #: calls of training_cost the search made (memory alone, then timed)
    priced: int
    usable_memory_bytes: int
    #: where nothing fits, what to change (one sentence); else None
    advice: str | None = None
    fixed: dict[str, Any] = field(default_factory=dict)
    #: for each ranked layout, the other ZeRO stages of it that take the same step (folded
    #: into its row, which is the one of them that needs the least memory: :func:`_collapse`)
    tied_zero: tuple[tuple[int, ...], ...] = ()
    #: what the search did not do that was asked (a list limit dropped), one sentence each
    notes: tuple[str, ...] = ()

    @property
    def best(self) -> TrainingCost | None:
        return self.ranked[0] if self.ranked else None

    def ties(self, i: int) -> tuple[int, ...]:
        """The ZeRO stages folded into the ``i``-th ranked layout (same step, more memory)."""
        return self.tied_zero[i] if i < len(self.tied_zero) else ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "hardware": self.hardware,
            "gpus": list(self.gpus),
            "seq_len": self.seq_len,
            "global_batch": self.global_batch,
            "tried": self.tried,
            "fitted": self.fitted,
            "not_fit": dict(self.not_fit),
            "priced": self.priced,
            "usable_memory_bytes": self.usable_memory_bytes,
            "advice": self.advice,
            "notes": list(self.notes),
            "fixed": dict(self.fixed),
            "ranked": [
                {
                    "setting": setting(c),
                    "tied_zero": list(self.ties(i)),
                    "bound": bound_of(c)[0],
                    **c.to_dict(),
                }
                for i, c in enumerate(self.ranked)
            ],
        }


def setting(c: TrainingCost) -> dict[str, int | str]:
    """The searched settings of a priced layout (as ``training_cost`` takes them)."""
    lay = c.layout
    return {
        "tp": lay.tp,
        "cp": lay.cp,
        "pp": lay.pp,
        "dp": lay.dp,
        "ep": lay.ep,
        "virtual_stages": lay.vp,
        "zero": c.zero,
        "recompute": c.recompute,
        "micro_batch": lay.micro_batch,
    }


def bound_of(c: TrainingCost) -> tuple[str, float]:
    """The one part of a timed step that takes the most of it, and its share: the compute
    (forward, backward, recompute over the micro-batches), the communication a micro-batch
    does not hide (named by its largest term), the pipeline bubble, the exposed data-parallel
    traffic or the optimizer step. These add to the step."""
    t, n = c.time, c.layout.micro_batches
    compute = min(t.micro_batch_s, t.forward_s + t.backward_s + t.recompute_s)
    comms = {
        "tensor-parallel comm": t.tp_comm_s,
        "expert-parallel comm": t.ep_comm_s,
        "pipeline comm": t.pp_comm_s,
        "context-parallel ring": t.cp_exposed_s,
    }
    parts = {
        "compute": n * compute,
        max(comms, key=comms.get): n * (t.micro_batch_s - compute),
        "pipeline bubble": t.bubble_s,
        "data-parallel comm": t.dp_exposed_s,
        "optimizer step": t.optimizer_s,
    }
    name = max(parts, key=parts.get)
    return name, parts[name] / t.step_s if t.step_s else 0.0


#: the store of the search's caches (a test swaps in one that keeps nothing)
_STORE = dict


@contextmanager
def memo() -> Iterator[None]:
    """Within it, two exact caches a search's pricings share: a stage's kernel times by every
    field of its kernels, the device and the profile (``step._SECONDS``), and a micro-batch's
    forward kernels by model and settings (``flops._FORWARD``); both dropped at its end, so a
    later change to the time model or a profile is never answered from them. Both are
    context variables: another thread's pricing (the app's sessions) is untouched."""
    seconds, forward = step._SECONDS.set(_STORE()), flops._FORWARD.set(_STORE())
    try:
        yield
    finally:
        step._SECONDS.reset(seconds)
        flops._FORWARD.reset(forward)


def _limits(name: str, value: Any) -> tuple[int, ...] | None:
    """A searched setting the caller restricts (None: every value)."""
    if value is None:
        return None
    return tuple(sorted({args.count(name, v, _MAX_GPUS) for v in args.one_or_many(name, value)}))


def _allowed(values: list[int], only: tuple[int, ...] | None) -> list[int]:
    return values if only is None else [v for v in values if v in only]


def _shapes(m: ModelConfig, node: int, g: int, seq_len: int, batch: int, only: dict):
    """The parallel shapes ``(tp, cp, pp, dp, ep, vp)`` of ``g`` GPUs that divide as a layout
    must (module docstring), each with the micro-batches it can run (``batch`` None: any
    ``dp``, micro-batch 1)."""
    layers, heads = m.num_hidden_layers, m.num_attention_heads
    for tp in _allowed(args.divisors(g), only["tp"]):
        if tp > node or heads % tp or kv_heads_unsplit(m, tp):
            continue
        for cp in _allowed(args.divisors(g // tp), only["cp"]):
            if cp > 1 and seq_len % (2 * cp):
                continue
            for pp in _allowed(args.divisors(g // (tp * cp)), only["pp"]):
                dp = g // (tp * cp * pp)
                if pp > layers or (batch is not None and batch % dp):
                    continue
                ranks = dp * cp * tp
                eps = args.divisors(math.gcd(m.n_routed_experts, ranks)) if m.is_moe else [1]
                vps = [1] + [v for v in range(2, layers // pp + 1) if layers % (pp * v) == 0]
                for ep in _allowed(eps, only["ep"]):
                    for vp in _allowed(vps if pp > 1 else [1], only["virtual_stages"]):
                        mbs = (
                            [1]
                            if batch is None
                            else [
                                b
                                for b in _allowed(args.divisors(batch // dp), only["micro_batch"])
                                if vp == 1 or (batch // (dp * b)) % pp == 0
                            ]
                        )
                        if mbs:
                            yield (tp, cp, pp, dp, ep, vp), mbs


class _Pricer:
    """training_cost over one search's fixed inputs, memoized, the refusals counted."""

    def __init__(self, m, hw, seq_len, batch, fixed, usable):
        self.m, self.hw, self.seq_len, self.batch = m, hw, seq_len, batch
        self.fixed, self.usable = fixed, usable
        self.calls = 0
        self.least: tuple[float, TrainingCost] | None = None  # the least memory priced
        self.why: dict[str, str] = {}  # each refusal's first message, by its reason

    def __call__(self, shape, zero, recompute, mb, timed=False) -> TrainingCost | str:
        tp, cp, pp, dp, ep, vp = shape
        self.calls += 1
        try:
            c = training_cost(
                self.m, self.seq_len, mb, recompute=recompute, tp=tp, pp=pp, dp=dp, ep=ep,
                cp=cp, virtual_stages=vp, global_batch=self.batch, zero=zero,
                hardware=self.hw if timed else None, **self.fixed,
            )  # fmt: skip
        except MlacalcError as e:
            reason = f"refused ({getattr(e, 'argument', type(e).__name__)})"
            self.why.setdefault(reason, str(e))
            return reason
        if self.least is None or c.memory_per_gpu < self.least[0]:
            self.least = (c.memory_per_gpu, c)
        return c


def _states(c: TrainingCost) -> int:
    return sum(c.states_per_gpu.values())


def _search_shape(price: _Pricer, shape, mbs, zeros, policies, not_fit: Counter) -> list:
    """The fitting settings ``(zero, recompute, micro_batch)`` of one parallel shape, the
    others counted in ``not_fit`` by reason (pruned as the module docstring says)."""
    each = len(policies) * len(mbs)
    fits = []
    for zero in zeros:
        first = price(shape, zero, policies[-1], mbs[0])
        if isinstance(first, str):
            not_fit[first] += each
            continue
        if _states(first) > price.usable:
            not_fit[STATES] += each
            continue
        for recompute in policies:
            for i, mb in enumerate(mbs):
                c = first if (recompute, mb) == (policies[-1], mbs[0]) else None
                c = c or price(shape, zero, recompute, mb)
                if isinstance(c, str):
                    not_fit[c] += 1
                elif c.memory_per_gpu > price.usable:
                    not_fit[ACTIVATIONS] += len(mbs) - i
                    break
                else:
                    fits.append((zero, recompute, mb))
    return fits


def training_search(
    model: ModelConfig | str,
    hardware: Any,
    gpus: Any,
    global_batch: int,
    seq_len: int = 4096,
    *,
    top: int = 5,
    tp: Any = None,
    pp: Any = None,
    cp: Any = None,
    ep: Any = None,
    virtual_stages: Any = None,
    micro_batch: Any = None,
    zero: Any = None,
    recompute: Any = None,
    **fixed: Any,
) -> TrainingSearch:
    """The layouts of ``gpus`` GPUs (one count or several) of ``hardware`` that fit ``model``'s
    training at ``seq_len`` tokens and ``global_batch`` sequences a step, the fastest ``top``
    of them, and why the others do not fit.

    ``tp``, ``pp``, ``cp``, ``ep``, ``micro_batch``, ``zero`` and ``recompute`` restrict the
    search to the values given (one or a list; None: every value that divides);
    ``virtual_stages`` lists the interleaved schedules searched (None: 1, plain 1F1B; each
    ``v > 1`` only where ``pp x v`` divides the layers). ``fixed`` holds the rest of
    :func:`~mlacalc.training.cost.training_cost`'s settings (``impl``, ``optimizer``,
    ``precision``, ``overlap``, ``comm_sms``, ``memory_reserve``, ``swiglu``, ``lora_rank``,
    ``lora_targets``, ``base_dtype``, ``profile``, ``attention``, ``schedule``), the same for
    every layout (``schedule`` zb-h1: no interleaving searched).

    >>> s = training_search("llama-3.1-8b", "H100", 8, global_batch=64, seq_len=4096)
    >>> s.best.layout.gpus, s.fitted <= s.tried
    (8, True)
    """
    m = model_argument(model)
    hw = hardware if isinstance(hardware, HardwareSpec) else load_hardware(hardware)
    counts = _limits("gpus", gpus)
    batch = args.count("global_batch", global_batch, 1 << 40)
    seq_len = args.count("seq_len", seq_len, 1 << 30)
    top = args.count("top", top, 1 << 20)
    wrong = sorted(set(fixed) - _FIXED)
    if wrong:
        raise InvalidArgumentError(
            wrong[0], f"not a setting of training_search; fixed ones: {', '.join(sorted(_FIXED))}"
        )
    # the fixed settings checked once, on one GPU at ZeRO-1 (their errors name them)
    training_cost(m, seq_len, 1, global_batch=1, zero=1, **fixed)
    reserve = fixed.get("memory_reserve", D.MEMORY_RESERVE)
    reserve = check_number("memory_reserve", reserve, 0.0, 1.0, allow_none=False)
    node = hw.scale_up_gpus or max(counts)
    _check_nodes(hw, node, counts)
    only = {
        "tp": _limits("tp", tp),
        "pp": _limits("pp", pp),
        "cp": _limits("cp", cp),
        "ep": _limits("ep", ep),
        # interleaving is searched where asked: its pricing simulates the schedule a
        # micro-batch at a time, the search's costliest call by far
        "virtual_stages": _limits("virtual_stages", virtual_stages or 1),
        "micro_batch": _limits("micro_batch", micro_batch),
    }
    impl = fixed.get("impl", "expanded")
    attention = fixed.get("attention") or default_attention(impl)
    _refuse_limits(m, only, attention, impl, fixed.get("schedule", "1f1b"))
    notes = ()
    if str(fixed.get("schedule", "1f1b")).strip().lower() == "zb-h1":  # whole stages only
        dropped = [v for v in only["virtual_stages"] or () if v != 1]
        only["virtual_stages"] = (1,)
        if dropped:
            notes = (
                f"virtual_stages {_listed(tuple(dropped))} not searched: schedule zb-h1 splits "
                "whole stages' backwards, not interleaved chunks (virtual_stages 1 only)",
            )
    if attention != "flash":  # the ring's flash kernel does not split materialized attention
        only["cp"] = tuple(x for x in only["cp"] or (1,) if x == 1)
    zeros = _nf4_zeros(_choices("zero", zero, _ZERO), fixed.get("base_dtype"))
    policies = _policies(m, fixed.get("impl", "expanded"), recompute)
    usable = usable_of(int(hw.memory_bytes), 0, reserve)
    price = _Pricer(m, hw, seq_len, batch, fixed, usable)
    tried, not_fit, fitting = 0, Counter(), []
    with memo():
        for g in counts:
            for shape, mbs in _shapes(m, node, g, seq_len, batch, only):
                shards = shape[3] * shape[1] > 1 or (m.is_moe and _expert_dp(m, shape, mbs) > 1)
                these = zeros if shards else (min(zeros, key=lambda z: abs(z - 1)),)
                tried += len(these) * len(policies) * len(mbs)
                fits = _search_shape(price, shape, mbs, these, policies, not_fit)
                fitting += [(shape, *f) for f in fits]
        if not tried:
            unit = "scale-up domain" if hw.scale_up_domain_gpus else "node"
            raise _nothing_splits(m, node, counts, seq_len, batch, only, unit)
        rows = _collapse(_timed_top(price, fitting, top, policies))[:top]
    return TrainingSearch(
        model=m.name,
        hardware=hw.name,
        gpus=counts,
        seq_len=seq_len,
        global_batch=batch,
        ranked=tuple(c for c, _ in rows),
        tried=tried,
        fitted=len(fitting),
        not_fit=dict(not_fit.most_common()),
        priced=price.calls,
        usable_memory_bytes=usable,
        advice=None if fitting else _advice(price, not_fit, policies, counts, hw),
        fixed=dict(fixed),
        tied_zero=tuple(t for _, t in rows),
        notes=notes,
    )


def _collapse(timed: list[TrainingCost], limit: int = 0) -> list[tuple[TrainingCost, tuple]]:
    """The timed layouts (in :func:`_order`) with those that differ from an earlier one only
    by the ZeRO stage and take the same step folded into it: each row the stage that needs the
    least memory (the order's tie-break), the folded stages beside it, ascending. Where a ZeRO
    stage's traffic is hidden, ZeRO-1, -2 and -3 take the same step and had filled the table.
    ``limit``: the first that many rows (their folded stages perhaps not all), else all."""
    rows: dict[tuple, tuple[TrainingCost, list[int]]] = {}
    for c in timed:
        key = (*(v for k, v in setting(c).items() if k != "zero"), c.time.step_s)
        if limit and len(rows) >= limit and key not in rows:
            break
        if key in rows:
            rows[key][1].append(c.zero)
        else:
            rows[key] = (c, [])
    return [(c, tuple(sorted(t))) for c, t in rows.values()]  # one order: 3 (or 1, 2)


def _order(c: TrainingCost) -> tuple:
    """The ranking: the shorter step first, then fewer GPUs, then less memory a GPU."""
    return (c.time.step_s, c.layout.gpus, c.memory_per_gpu)


#: the step-time order the timing relies on: at the same shape and micro-batch, a setting
#: is no faster than one it "follows" (``(zero, recompute)`` pairs): more recomputation adds
#: kernels, ZeRO-0 runs ZeRO-1's traffic with a larger optimizer pass, ZeRO-2 reduce-scatters
#: every micro-batch where ZeRO-1 reduces once, and ZeRO-3 adds its gathers to ZeRO-2's
_SLOWER_ZERO = {0: {1}, 1: set(), 2: {1}, 3: {1, 2}}


def _follows(x: tuple, y: tuple, policies: tuple[str, ...]) -> bool:
    """Whether setting ``x = (zero, recompute)`` is no faster than ``y`` by :data:`_SLOWER_ZERO`
    and the recompute order (``x != y``)."""
    zero_ok = x[0] == y[0] or y[0] in _SLOWER_ZERO[x[0]]
    return x != y and zero_ok and policies.index(x[1]) >= policies.index(y[1])


def _timed_top(price: _Pricer, fitting: list, top: int, policies) -> list[TrainingCost]:
    """The fitting layouts that make the fastest ``top`` rows (ZeRO ties folded,
    :func:`_collapse`), timed lazily: at each shape and micro-batch
    the settings no other fitting one is faster than (by :func:`_follows`) are timed first; a
    setting that follows a timed one is timed only where that one's step is within the
    ``top``-th best (it cannot be faster than it), so what is left untimed cannot enter."""
    groups: dict[tuple, list[tuple]] = {}
    for shape, zero, recompute, mb in fitting:
        groups.setdefault((shape, mb), []).append((zero, recompute))
    timed: list[TrainingCost] = []
    waiting: list[tuple[float, tuple]] = []
    for (shape, mb), settings in groups.items():
        lead = [x for x in settings if not any(_follows(x, y, policies) for y in settings)]
        steps = {}
        for x in lead:
            c = price(shape, *x, mb, timed=True)
            if not isinstance(c, str):
                timed.append(c)
                steps[x] = c.time.step_s
        for x in settings:
            if x not in lead:
                below = [steps[y] for y in steps if _follows(x, y, policies)]
                waiting.append((max(below, default=0.0), (shape, *x, mb)))
    timed.sort(key=_order)
    for bound, (shape, zero, recompute, mb) in sorted(waiting, key=lambda w: w[0]):
        rows = _collapse(timed, top)  # ties folded: the top-th row, not the top-th layout
        if len(rows) >= top and bound > rows[top - 1][0].time.step_s:
            break
        c = price(shape, zero, recompute, mb, timed=True)
        if not isinstance(c, str):
            timed.append(c)
            timed.sort(key=_order)
    return timed


def _expert_dp(m: ModelConfig, shape, mbs) -> int:
    tp, cp, pp, dp, ep, _ = shape
    return expert_dp(make_layout(m, tp, pp, dp, ep, mbs[0], None, cp))


def _nf4_zeros(zeros: tuple, base_dtype: Any) -> tuple:
    """The ZeRO stages searched: QLoRA's NF4 base under ZeRO-3 is not built (the cost function
    refuses it), so it is not searched, and refused with the cause where it alone is asked."""
    if str(base_dtype).strip().lower() != "nf4":
        return zeros
    out = tuple(z for z in zeros if z != 3)
    if not out:
        raise InvalidArgumentError(
            "zero",
            "'nf4' under ZeRO-3 (FSDP-QLoRA: its 4-bit shards gathered) is not built: search "
            "zero 0, 1 or 2, or base_dtype 'compute'",
        )
    return out


def _choices(name: str, value: Any, options: tuple) -> tuple:
    if value is None:
        return options
    out = tuple(dict.fromkeys(args.one_or_many(name, value)))
    for v in out:
        if isinstance(v, bool) or v not in options:
            raise InvalidArgumentError(
                name, f"{args.show_value(v)} is not one of {', '.join(map(str, options))}"
            )
    return out


def _policies(m: ModelConfig, impl: str, recompute: Any) -> tuple[str, ...]:
    """The recompute policies searched, least recomputation first (``kv_up`` only where MLA
    runs its up-projection: the expanded path)."""
    usable = tuple(
        p for p in RECOMPUTE_POLICIES if p != "kv_up" or (m.is_mla and impl == "expanded")
    )
    chosen = _choices("recompute", recompute, tuple(RECOMPUTE_POLICIES))
    order = ("none", "kv_up", "full")
    out = tuple(p for p in order if p in chosen and p in usable)
    if not out:
        raise InvalidArgumentError(
            "recompute", f"'kv_up' alone is not a policy {m.label} runs; add 'none' or 'full'"
        )
    return out


def _check_nodes(hw: HardwareSpec, node: int, counts: tuple[int, ...]) -> None:
    """A GPU count above one node that is not whole nodes is refused. The node is the
    machine's (``gpus_per_node``: a GB200 NVL72 rack's 4-GPU tray), not the scale-up domain
    ``node`` that bounds ``tp``: a job of 256 GB200s fills three racks and part of a fourth
    (each tensor-parallel group within one), where whole 72-GPU racks had been asked for and
    every power of two above 72 refused ("use 216 or 288")."""
    unit = hw.gpus_per_node or node
    for g in counts:
        if hw.scale_up_gpus and g > unit and g % unit:
            lo = g // unit * unit
            why = " (tensor parallelism stays within one)" if unit == node else ""
            raise InvalidArgumentError(
                "gpus",
                f"{g:,} GPUs are not whole {unit}-GPU nodes of {hw.name}{why}: use {lo:,} or "
                f"{lo + unit:,}",
            )


def _refuse_limits(m: ModelConfig, only: dict, attention: str, impl: str, schedule: str) -> None:
    """Restrictions no layout of the model can meet, refused with their cause as `mlacalc
    train` refuses them: context parallelism alone under materialized attention, expert
    parallelism alone on a model without experts, interleaving alone under ZB-H1."""
    cps, eps, vps = only["cp"], only["ep"], only["virtual_stages"]
    if str(schedule).strip().lower() == "zb-h1" and vps and 1 not in vps:
        raise InvalidArgumentError(
            "virtual_stages",
            "zb-h1 splits whole stages' backwards, not interleaved chunks: search "
            "virtual_stages 1, or schedule 1f1b",
        )
    if attention != "flash" and cps and 1 not in cps:
        raise InvalidArgumentError(
            "cp",
            f"context parallelism runs a flash kernel around the ring; the {impl} path's "
            "materialized probabilities are not split by it: use cp 1, or impl expanded",
        )
    if not m.is_moe and eps and 1 not in eps:
        raise InvalidArgumentError(
            "ep",
            f"{m.label} has no experts to spread over {eps[0]} ranks; use ep 1 or leave it out",
        )


def _nothing_splits(
    m, node, counts, seq_len, batch, only, unit: str = "node"
) -> InvalidArgumentError:
    """The error where no layout divides: the global batch, else the one restriction without
    which some layout would (the micro-batch named with the shares it must divide), else the
    restrictions together. ``unit``: what bounds tp, in words (a node; an NVLink domain of
    several nodes, GB200's 72 GPUs, a "scale-up domain": a 4-GPU tray is GB200's node)."""
    dps = sorted({s[3] for g in counts for s, _ in _shapes(m, node, g, seq_len, None, only)})
    if dps and not any(batch % dp == 0 for dp in dps):
        return InvalidArgumentError(
            "global_batch",
            f"{batch:,} sequences split over none of the data-parallel sizes {counts[0]:,} "
            f"GPUs allow ({', '.join(map(str, dps[:6]))}"
            + (", ..." if len(dps) > 6 else "")
            + "); use a multiple of one",
        )
    given = [k for k, v in only.items() if v is not None and (k, v) != ("virtual_stages", (1,))]
    for name in given:
        loose = {**only, name: None}
        shapes = [s for g in counts for s, _ in _shapes(m, node, g, seq_len, batch, loose)]
        if name == "micro_batch" and shapes:
            shares = sorted({batch // s[3] for s in shapes}, reverse=True)
            vp = " (under interleaving, into a multiple of pp micro-batches)" * any(
                s[5] > 1 for s in shapes
            )
            return InvalidArgumentError(
                "micro_batch",
                f"no micro-batch of {_listed(only['micro_batch'])} divides a data-parallel "
                f"rank's share of the {batch:,} sequences{vp} (one of {_listed(shares)}); use "
                "a divisor of one of those shares, or leave it out",
            )
        unsplit = [
            m.num_attention_heads % t == 0 and kv_heads_unsplit(m, t)
            for t in (only[name] if name == "tp" else (1,))
        ]
        if shapes and all(unsplit):
            return InvalidArgumentError(
                "tp",
                f"tp {_listed(only['tp'])} neither splits nor copies whole the {unsplit[0]} KV "
                f"heads (num_key_value_heads) of {m.label}; the degrees of "
                f"{', '.join(map(str, counts))} GPUs that do: "
                f"{_listed(sorted({s[0] for s in shapes}))}",
            )
        if shapes:
            return InvalidArgumentError(
                name,
                f"with {name} {_listed(only[name])} no layout of "
                f"{', '.join(map(str, counts))} GPUs divides as {m.label} needs "
                f"({_NEEDS.format(m=m, node=node, unit=unit)}); loosen it",
            )
    return InvalidArgumentError(
        given[0] if given else "gpus",
        f"no layout of {', '.join(map(str, counts))} GPUs divides as {m.label} needs "
        f"({_NEEDS.format(m=m, node=node, unit=unit)}) with "
        + (", ".join(given) if given else "these settings")
        + " as given; loosen them",
    )


#: how a layout must divide, in the refusals' words
_NEEDS = (
    "its {m.num_attention_heads} heads over tp within a {unit} of {node} GPUs (its "
    "num_key_value_heads split or copied whole), 2 x cp chunks "
    "dividing the sequence, pp at most its {m.num_hidden_layers} layers, ep dividing the experts"
)


def _listed(values) -> str:
    shown = ", ".join(map(str, values[:6]))
    return shown + (", ..." if len(values) > 6 else "")


def _advice(price: _Pricer, not_fit: Counter, policies, counts, hw: HardwareSpec) -> str:
    """What to change where no layout fits, in one sentence."""
    usable = price.usable
    if price.least is None:
        reason = next(iter(not_fit), "refused")
        return f"every layout was refused by the cost function: {price.why.get(reason, reason)}"
    least, c = price.least[1].memory_per_gpu, price.least[1]
    states = _states(c)
    if states > usable:
        more = max(counts) * math.ceil(states / usable)
        return (
            f"the weights and optimizer states alone take at least {human_bytes(states)} a GPU "
            f"(tp {c.layout.tp} cp {c.layout.cp} pp {c.layout.pp} dp {c.layout.dp} ep "
            f"{c.layout.ep}, ZeRO-"
            f"{c.zero}) of the {human_bytes(usable)} usable on {hw.name}: more GPUs (about "
            f"{more:,}), LoRA (lora_rank) or a lighter optimizer or precision"
        )
    fix = "recompute 'full'" if "full" not in policies else "a shorter sequence (seq_len)"
    return (
        f"the weights and states fit but the activations do not: at least "
        f"{human_bytes(least)} a GPU against {human_bytes(usable)} usable on {hw.name}; "
        f"{fix}, or more GPUs for context parallelism (cp)"
    )
