"""Requests arriving at random into a continuous-batching engine: the steps they make.

An engine serving an arrival rate runs steps back to back. Each step carries the running
decode batch and every prompt that arrived during the step before it (in-flight batching:
a prompt joins the next step, all of it, and the prompts batched together wait for each
other). Step lengths therefore depend on arrivals: a step that carries ``n`` prompts takes
``t[n]`` (``t[0]`` is the decode-only step), and the number of prompts the next step
carries is Poisson with mean ``rate x t[n]`` (arrivals at a fixed mean rate with no memory,
as a load generator at a set request rate sends them).

:func:`step_chain` solves this Markov chain over the prompts per step and gives what a
request sees:

- its wait for the step in progress: an arrival falls in long steps more often than in
  short ones (its chance is proportional to the step's length), and waits half of that step
  on average: ``E[T^2] / (2 E[T])`` over steps, not half the mean step;
- its own step: itself and the others that arrived during the same step, ``t[1 + N]`` with
  ``N`` Poisson of mean ``rate x`` that step's length;
- the mean step the running sequences see (their inter-token latency): ``E[T]`` over steps.

A step carries at most ``len(t) - 1`` prompts (the engine's token budget per step); more are
counted in the fullest step (a load that would need more is not sustainable, and the
planner says so apart).

The chain is solved exactly over up to :data:`EXACT_STATES` states. A longer table (short
prompts: 16,385 states at one token) is solved over bins, one state each up to
:data:`EXACT_STATES` / 2 prompts and then 2% wide (finer than the Poisson spread there), each
bin stepping for the mean of its steps; the Poisson rows are built a block at a time, so a
chain of any length takes a few megabytes and well under a second (a dense chain of 16,385
states took 2 GB per matrix and minutes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["EXACT_STATES", "StepChain", "sample_states", "step_chain"]

#: Most states the chain is solved over exactly (a 512 x 512 matrix: 2 MiB); longer tables
#: are solved over bins.
EXACT_STATES = 512
#: Width of a bin past the exact states, relative to its prompts.
_BIN_RATIO = 1.02
#: Most Poisson probabilities held at once while a binned chain is built (8 bytes each).
_BLOCK_CELLS = 1 << 19


@dataclass(frozen=True)
class StepChain:
    """What arrivals at a rate see in an engine whose steps take ``t[n]`` with ``n`` prompts."""

    #: mean wait for the step in progress when a request arrives
    wait_s: float
    #: mean length of the step that runs a request's prompt (its first token)
    own_step_s: float
    #: mean step length over steps (what a decoding sequence waits per token)
    mean_step_s: float
    #: mean prompts per step
    prompts_per_step: float

    @property
    def ttft_s(self) -> float:
        """Time to first token: the wait for the step in progress, then the request's step."""
        return self.wait_s + self.own_step_s


def _poisson(mean: np.ndarray, k_max: int, lg: np.ndarray | None = None) -> np.ndarray:
    """Rows of Poisson probabilities of 0..k_max for each mean, the tail folded into k_max
    (``lg``: ``log(k!)`` of 0..k_max, when the caller has it)."""
    k = np.arange(k_max + 1)
    if lg is None:
        lg = _log_factorials(k_max)
    mean = np.maximum(np.asarray(mean, dtype=np.float64), 1e-300)[:, None]
    p = np.exp(k * np.log(mean) - mean - lg)
    p[:, -1] += np.maximum(1.0 - p.sum(axis=1), 0.0)
    return p


def step_chain(t: np.ndarray, rate: float) -> StepChain:
    """The steady state of steps of length ``t[n]`` (``n`` prompts, ``n = 0 .. len(t) - 1``)
    under Poisson arrivals at ``rate`` per second (see the module docstring).

    Examples
    --------
    >>> c = step_chain(np.array([0.01, 0.03, 0.05]), 1e-9)   # almost no arrivals
    >>> round(c.wait_s, 6), round(c.own_step_s, 6), round(c.mean_step_s, 6)
    (0.005, 0.03, 0.01)
    """
    t = np.asarray(t, dtype=np.float64)
    k_max = len(t) - 1
    if k_max + 1 > EXACT_STATES:
        return _binned_chain(t, rate)
    P = _poisson(rate * t, k_max)  # P[i, j]: a step with i prompts -> the next carries j
    own_idx = np.minimum(np.arange(k_max + 1) + 1, k_max)
    own = P @ t[own_idx]  # own step after a step with i prompts: itself + the others
    return _steady(P, t, own, np.arange(k_max + 1, dtype=np.float64))


def _log_factorials(k_max: int) -> np.ndarray:
    return np.array([math.lgamma(i + 1) for i in range(k_max + 1)])


def _steady(P: np.ndarray, t: np.ndarray, own: np.ndarray, prompts: np.ndarray) -> StepChain:
    """The chain's steady state from its transitions ``P`` between states whose steps take
    ``t``, the mean own step after each (``own``) and the prompts each carries."""
    pi = np.zeros(len(t))
    pi[0] = 1.0
    for _ in range(500):
        new = pi @ P
        if np.abs(new - pi).max() < 1e-12:
            pi = new
            break
        pi = new
    pi /= pi.sum()
    mean_step = float(pi @ t)
    w = pi * t / mean_step  # the chance an arrival falls in a step of each state
    return StepChain(
        wait_s=float(w @ t) / 2,
        own_step_s=float(w @ own),
        mean_step_s=mean_step,
        prompts_per_step=float(pi @ prompts),
    )


def _bin_starts(states: int) -> np.ndarray:
    """First state of each bin: one state each below ``EXACT_STATES // 2``, then bins
    ``_BIN_RATIO`` wide, and the last state alone."""
    starts = list(range(min(states, EXACT_STATES // 2)))
    while starts[-1] + 1 < states:
        nxt = max(starts[-1] + 1, math.floor(starts[-1] * _BIN_RATIO))
        if nxt >= states:
            break
        starts.append(nxt)
    if starts[-1] != states - 1:  # the fullest step, where a load it cannot carry piles up
        starts.append(states - 1)
    return np.array(starts, dtype=np.int64)


def _binned_chain(t: np.ndarray, rate: float) -> StepChain:
    """The chain over bins of states (see the module docstring), built a block of rows at a
    time: bounded in memory and time whatever ``len(t)``."""
    states = len(t)
    k_max = states - 1
    starts = _bin_starts(states)
    counts = np.diff(np.append(starts, states))
    t_bin = np.add.reduceat(t, starts) / counts  # each bin steps for the mean of its steps
    prompts = (starts + (counts - 1) / 2.0).astype(np.float64)
    own_idx = np.minimum(np.arange(states) + 1, k_max)
    t_own = t[own_idx]
    lg = _log_factorials(k_max)
    nb = len(starts)
    P = np.zeros((nb, nb))
    own = np.empty(nb)
    block = max(1, min(32, _BLOCK_CELLS // states))
    k = np.arange(states)
    for lo in range(0, nb, block):
        mean = np.maximum(rate * t_bin[lo : lo + block], 1e-300)[:, None]
        # the columns these rows can reach: 12 standard deviations about their means (the
        # mass beyond is below 1e-30); the tail past the last state folds into it
        first = int(max(0.0, math.floor(mean.min() - 12 * math.sqrt(mean.min()) - 30)))
        last = int(min(k_max, math.ceil(mean.max() + 12 * math.sqrt(mean.max()) + 30)))
        first = min(first, last)
        cols = k[first : last + 1]
        rows = np.exp(cols * np.log(mean) - mean - lg[first : last + 1])
        if last == k_max:
            rows[:, -1] += np.maximum(1.0 - rows.sum(axis=1), 0.0)
        j0 = int(np.searchsorted(starts, first, side="right")) - 1
        j1 = int(np.searchsorted(starts, last, side="right"))
        edges = np.maximum(starts[j0:j1], first) - first
        P[lo : lo + block, j0:j1] = np.add.reduceat(rows, edges, axis=1)
        own[lo : lo + block] = rows @ t_own[first : last + 1]
    return _steady(P, t_bin, own, prompts)


def sample_states(states: int) -> np.ndarray:
    """The states a step table of ``states`` entries needs timing at: all of them up to
    :data:`EXACT_STATES`, else the first of each bin (:func:`step_chain` interpolates the
    others)."""
    return np.arange(states) if states <= EXACT_STATES else _bin_starts(states)
