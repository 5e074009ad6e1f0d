"""An unchunked prompt crosses the pipeline stages one after another: with pipeline
parallelism its TTFT is never below its own one-pass prefill (trial round 29, finding 1:
llama-3.1-70b TP1 PP4 at 32K printed a 4,252.8 ms TTFT beside an 8,040.8 ms pass, and
``search`` picked TP1 PP8 for a 128K prompt from figures like it)."""

import numpy as np
import pytest

from mlacalc import plan
from mlacalc.serving.figures import micro_batch_prompts

_KW = dict(isl=32768, osl=1024, engine_defaults="none")


@pytest.mark.parametrize("pp", [2, 4])
def test_unchunked_prompt_ttft_is_at_least_its_pass_under_pp(pp):
    p = plan("llama-3.1-70b", "H200", pp, tp=1, pp=pp, concurrency=2, **_KW)
    assert p.prefill_s is not None and p.ttft_s >= p.prefill_s


def test_unchunked_prompt_ttft_under_random_arrivals_and_pp():
    p = plan("llama-3.1-70b", "H200", 4, tp=1, pp=4, request_rate=0.05, **_KW)
    assert p.ttft_s >= p.prefill_s


def test_whole_prompts_per_micro_batch():
    per, moe = micro_batch_prompts(np.array([1.0, 4.0, 5.0]), np.array([0.5, 4.0, 2.5]), 4.0)
    assert per.tolist() == [1.0, 1.0, 2.0]  # a prompt is never split over micro-batches
    assert moe.tolist() == [0.5, 1.0, 1.0]  # the experts' share of the slowest, as before
    one, mean = micro_batch_prompts(3.0, 2.0, 1.0)  # no pipeline: unchanged
    assert float(one) == 3.0 and float(mean) == 2.0
