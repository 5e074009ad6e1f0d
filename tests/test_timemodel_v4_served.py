"""A served DeepSeek-V4 step's prompt core under SGLang is the kernel its module rows are mapped
as: every sequence's tokens one ragged batch, timed by the class fitted on those rows."""

from __future__ import annotations

import pytest

import mlacalc
from mlacalc.measured.dsv4_modules import dsv4_module_kernels
from mlacalc.timemodel.kernel_time import RAGGED, RAGGED_CORE, engine_v4_prompt_core
from mlacalc.timemodel.profile import load_profile
from mlacalc.words.kernels import batches_of

ROW = ("sgl-project/DeepSeek-V4-Flash-FP8", "hca", 64, "bfloat16", 256, 4, 128)


def _core_batch(kernels):
    (core,) = [k for k in kernels if k.name == "attention"]
    return batches_of([core])[0][1]


@pytest.mark.parametrize("kind", ["hca", "csa"])
def test_sglangs_served_prompt_core_is_the_mapped_ragged_kernel(kind):
    """The step builds the core per sequence (``batch`` x ``q_len``); under SGLang the time
    model runs it as the mapping runs SGLang's module rows: one sequence of all the tokens, the
    ``sparse_ragged`` class (a served V4 prompt had been timed by vLLM's ``sparse`` prefill
    class, which SGLang's rows outgrow 1.8-1.9x with the cached tokens)."""
    row = (ROW[0], kind, *ROW[2:])
    plain = _core_batch(dsv4_module_kernels(*row, False))
    mapped = _core_batch(dsv4_module_kernels(*row, False, ragged=True))
    served = engine_v4_prompt_core(plain, "sglang")
    assert served.variant == RAGGED_CORE == "sparse_ragged" and {"sglang"} == RAGGED
    assert served.shape.keys() == mapped.shape.keys()
    for name, values in mapped.shape.items():
        assert served.shape[name].tolist() == values.tolist(), name
    for engine in ("vllm", "trtllm"):
        assert engine_v4_prompt_core(plain, engine) is plain


def test_a_served_sglang_v4_prompt_reads_the_ragged_class_and_a_profile_without_it_the_sparse():
    """DeepSeek-V4-Pro's prompt on B200 under SGLang: its cores run the profile's
    ``sparse_ragged`` fit (longer than vLLM's kernel, as the rows show); a profile that lacks
    the variant times them by FlashMLA's ``sparse`` prefill fit, not the dense prompt class."""

    def core_ms(engine):
        p = mlacalc.predict_time("deepseek-v4-pro", "B200", "prefill", 8192, 1, engine=engine)
        return sum(o.model_s for o in p.ops if o.name == "attention") * 1e3

    assert core_ms("sglang") > 1.3 * core_ms("vllm")
    prof = load_profile("fit-b200-sxm-sglang")
    own, _ = prof.params("B200", "attention_prefill", "bf16", variant="sparse_ragged")
    parent, _ = prof.params("B200", "attention_prefill", "bf16", variant="sparse")
    assert own != parent
    vllm = load_profile("fit-b200-sxm-vllm")
    assert "attention_prefill:bf16:sparse_ragged" not in vllm.classes
    lent, _ = vllm.params("B200", "attention_prefill", "bf16", variant="sparse_ragged")
    assert lent == vllm.params("B200", "attention_prefill", "bf16", variant="sparse")[0]
