"""Ranks that wait for each other: the prompts each attention group prefills in a step, and how
unevenly the routing loads the experts.

**Rank synchronisation.** Under DP-attention (or any layout whose MoE group spans several
attention groups) every group meets the others at the expert exchange of every MoE layer, so a
step lasts as long as its slowest group's. Requests are dealt to the groups in turn (SGLang's
round-robin data-parallel dispatch), so when ``K`` prompts join one step of ``g`` synced
groups, the slowest group prefills ``ceil(K / g)`` of them while the experts see the set's mean,
``K / g`` per group. With ``n`` prompts per group per step on average, the set brings ``N = g n``
prompts a step. Each group takes the planner's unsynced rule (``k = ceil(n)`` prompts in a
share ``p = n / k`` of its steps), independently of the others, so a share ``1 - (1 - p)^g``
of the set's steps, up to ``g`` times more than one group's, is as slow as the step that
carries ``k`` prompts, which is what the mean over groups misses.

**Routing imbalance.** A step routes ``C = tokens x top-k`` copies over ``ep`` ranks. The rank
the exchange waits for holds the hottest experts:

- the experts' popularity: Zipf-like with exponent ``skew`` (expert ``i`` of ``E`` drawn with
  probability proportional to ``(i + 1)^-skew``; 0: all equally popular). Placed without
  rebalancing, each rank holds ``E / ep`` experts at random, its share of the copies a sum
  drawn without replacement; the hottest of ``ep`` ranks is the mean plus the expected maximum
  of ``ep`` standard normals times its standard deviation. Rebalanced (``rebalance=True``, as
  DeepSeek's EPLB does from measured loads), the ``redundant`` extra slots replicate the
  experts with the most load per copy (each replica takes an equal part), then the slots are
  packed onto ranks, heaviest first onto the least-loaded rank with a free slot; the hottest
  rank is then exact (taken as the largest at any skew up to the given one, so that the greedy
  packing's granularity never makes a more skewed popularity look easier);
- the step's finite sample (``routing="random"``): a rank's copies are binomial around its
  share, so the hottest rank takes ``c(ep)`` standard deviations more, ``sqrt(mean)`` each;
  ``routing="balanced"`` drops this (DeepSeek's profile "simulates an absolutely balanced MoE
  routing strategy").

The hottest rank's load over the even share is the step's ``routing_imbalance`` (the user's
measured factor multiplies it); within that rank its busiest expert carries the mean per expert
plus ``c(local)`` standard deviations, the rows the grouped GEMM's longest tile column runs.
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

import numpy as np

from mlacalc.models.loading import ModelConfig
from mlacalc.serving.layout import Layout

__all__ = [
    "ROUTINGS",
    "expected_max_normal",
    "hottest_expert_rows",
    "placement_imbalance",
    "rebalanced",
    "routing_factor",
    "synced_groups",
    "synced_prompts",
]

#: How a step's tokens spread over the experts: ``random`` (a finite sample of the experts'
#: popularity) or ``balanced`` (every rank exactly its share, as DeepSeek's profile simulates).
ROUTINGS = ("random", "balanced")


@lru_cache(maxsize=512)
def expected_max_normal(n: int) -> float:
    """The expected maximum of ``n`` independent standard normals (Blom's approximation,
    ``Phi^-1((n - 0.375) / (n + 0.25))``: 4% above the exact value at two, within 2% from five
    on; 0 for one)."""
    if n <= 1:
        return 0.0
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def synced_groups(m: ModelConfig, lay: Layout) -> int:
    """Attention groups that meet at a collective every MoE layer (1: each group runs on its
    own): those of a MoE group spanning several groups, under DP-attention or ``ep > tp``."""
    if not m.num_moe_layers or lay.moe_group <= lay.tp:
        return 1
    return lay.moe_group // lay.tp


def synced_prompts(
    n: np.ndarray | float, groups: int, k_max: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For ``n`` prompts per group per step (mean) over ``groups`` synced groups, each of which
    batches at most ``k_max`` prompts a step: ``K``, the prompts a step that carries any
    brings the set (mean); the share of steps that carry them; the slowest group's prompts in
    such a step; and the set's mean per group, ``K / groups``.

    Each group takes the one-group rule, ``k = ceil(n)`` prompts in a share ``p = n / k`` of
    its steps, the groups' prompts falling independently of each other (their requests end at
    random): a step carries a prompt on at least one group with probability ``1 - (1 - p)^g``,
    the slowest group ``k`` then, the set ``K = g n / (1 - (1 - p)^g)``. The share times the
    slowest's prompts never falls as ``n`` rises (``K = ceil(g n)`` in a share ``g n / K``,
    the rule before, fell from 1 to a half of the steps as ``g n`` passed 1, the slowest
    group still carrying one); one group is the rule exactly."""
    n = np.asarray(n, dtype=np.float64)
    N = n * groups
    k = np.clip(np.ceil(n - 1e-9), 1, k_max)
    p = np.minimum(n / k, 1.0)
    share = p if groups == 1 else 1.0 - (1.0 - p) ** groups
    K = np.clip(np.where(share > 0, N / np.maximum(share, 1e-300), k), 1, groups * k_max)
    return K, share, k, K / groups


def _popularity(experts: int, skew: float) -> np.ndarray:
    p = (np.arange(1, experts + 1, dtype=np.float64)) ** -float(skew)
    return p / p.sum()


@lru_cache(maxsize=256)
def placement_imbalance(
    experts: int, ep: int, redundant: int, skew: float, rebalance: bool
) -> float:
    """The hottest of ``ep`` ranks' expected share of the copies over the even share ``1 /
    ep``, from the experts' popularity alone (see the module docstring); 1 when every expert is
    equally popular (``skew = 0``) or one rank holds them all."""
    if ep <= 1 or skew <= 0:
        return 1.0
    p = _popularity(experts, skew)
    if not rebalance:
        local = experts / ep
        var = local * float(np.var(p)) * (experts - local) / max(experts - 1, 1)
        hottest = local / experts + expected_max_normal(ep) * math.sqrt(var)
        return max(hottest * ep, 1.0)
    # EPLB's greedy packing has a granularity of its own, which can make a more skewed
    # popularity pack a little better: the factor is the largest at any skew up to this one
    return max(_rebalanced(p_at, ep, redundant) for p_at in _skews_up_to(experts, skew))


#: The skews EPLB's placement is taken over (every multiple of this step up to the skew, and
#: the skew itself)
_SKEW_STEP = 0.05


def _skews_up_to(experts: int, skew: float) -> list[np.ndarray]:
    grid = [j * _SKEW_STEP for j in range(1, int(skew / _SKEW_STEP + 1e-9) + 1)]
    return [_popularity(experts, s) for s in [*grid, skew]]


def _rebalanced(p: np.ndarray, ep: int, redundant: int) -> float:
    """EPLB's placement of popularity ``p``: the ``redundant`` extra slots replicate the
    experts with the most load per replica, then the slots go onto the ranks, heaviest first
    onto the least-loaded rank with a free slot; the hottest rank over the even share."""
    replicas = np.ones(len(p))
    for _ in range(redundant):
        replicas[int(np.argmax(p / replicas))] += 1
    loads = np.sort(np.repeat(p / replicas, replicas.astype(int)))[::-1]
    per_rank = math.ceil(len(loads) / ep)
    rank_load = np.zeros(ep)
    free = np.full(ep, per_rank)
    for x in loads:
        r = int(np.argmin(np.where(free > 0, rank_load, np.inf)))
        rank_load[r] += x
        free[r] -= 1
    return max(float(rank_load.max()) * ep, 1.0)


def rebalanced(redundant: int, rebalance: bool | None) -> bool:
    """Whether the experts' placement is rebalanced (EPLB): as asked, else by default where
    ``redundant`` replicas are placed."""
    return redundant > 0 if rebalance is None else bool(rebalance)


def routing_factor(copies: np.ndarray, ep: int, placement: float, routing: str) -> np.ndarray:
    """The hottest rank's copies over the even share ``copies / ep``: the placement's factor
    and, under ``random`` routing, the sample's spread, ``c(ep) sqrt(share (1 - 1 / ep))``
    standard deviations of a binomial share (see the module docstring)."""
    copies = np.asarray(copies, dtype=np.float64)
    if ep <= 1:
        return np.ones_like(copies)
    mean = np.maximum(copies / ep * placement, 1e-12)
    if routing == "balanced":
        return np.full_like(copies, placement)
    spread = expected_max_normal(ep) * np.sqrt(mean * (1.0 - 1.0 / ep))
    return np.where(copies > 0, (mean + spread) / np.maximum(copies / ep, 1e-12), placement)


def hottest_expert_rows(assigned: np.ndarray, local: int, routing: str) -> np.ndarray:
    """Rows of a rank's busiest expert when ``assigned`` copies fall on its ``local`` experts:
    the mean per expert, plus (``random``) ``c(local)`` binomial standard deviations; at most
    every copy."""
    assigned = np.asarray(assigned, dtype=np.float64)
    per = assigned / max(local, 1)
    if routing == "balanced" or local <= 1:
        return np.ceil(per)
    spread = expected_max_normal(local) * np.sqrt(per * (1.0 - 1.0 / local))
    return np.minimum(np.ceil(per + spread), np.ceil(assigned))
