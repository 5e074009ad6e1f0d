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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["StepChain", "step_chain"]


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


def _poisson(mean: np.ndarray, k_max: int) -> np.ndarray:
    """Rows of Poisson probabilities of 0..k_max for each mean, the tail folded into k_max."""
    k = np.arange(k_max + 1)
    lg = np.array([math.lgamma(i + 1) for i in k])
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
    P = _poisson(rate * t, k_max)  # P[i, j]: a step with i prompts -> the next carries j
    pi = np.zeros(k_max + 1)
    pi[0] = 1.0
    for _ in range(500):
        new = pi @ P
        if np.abs(new - pi).max() < 1e-12:
            pi = new
            break
        pi = new
    pi /= pi.sum()
    mean_step = float(pi @ t)
    w = pi * t / mean_step  # the chance an arrival falls in a step with i prompts
    own_idx = np.minimum(np.arange(k_max + 1) + 1, k_max)
    own = P @ t[own_idx]  # own step after a step with i prompts: itself + the others
    return StepChain(
        wait_s=float(w @ t) / 2,
        own_step_s=float(w @ own),
        mean_step_s=mean_step,
        prompts_per_step=float(pi @ np.arange(k_max + 1)),
    )
