"""The reference layers compute the same attention whichever way they are run.

Without this, matching FLOP counts would only prove the shapes right: here the MLA
implementations must agree on shared weights, decode step by step must equal one
prefill, and the dense, causal and banded kernels must give the same outputs.
"""

import pytest

torch = pytest.importorskip("torch")

from mlacalc.bench.torch_layers import MHAReference, MLAReference  # noqa: E402

IMPLS = ("naive", "compressed", "absorbed", "absorbed_merged")


def mla(q_lora=True, bias=False, seed=0):
    torch.manual_seed(seed)
    layer = MLAReference(48, 4, 32, 24 if q_lora else None, 16, 8, 12, bias=bias).double()
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0, 0.2)
    return layer


@pytest.mark.parametrize("q_lora", [True, False])
@pytest.mark.parametrize("bias", [False, True])
def test_mla_implementations_agree(q_lora, bias):
    layer = mla(q_lora, bias)
    x = torch.randn(2, 9, 48, dtype=torch.float64)
    outputs = {}
    for impl in IMPLS:
        layer.impl = impl
        layer.merge_weights()
        outputs[impl], _ = layer(x, mode="dense")
    for impl in IMPLS[1:]:
        torch.testing.assert_close(outputs[impl], outputs["naive"], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("impl", IMPLS)
def test_mla_decode_equals_prefill(impl):
    layer = mla()
    layer.impl = impl
    x = torch.randn(2, 7, 48, dtype=torch.float64)
    full, _ = layer(x, mode="dense")
    cache, steps = None, []
    for t in range(7):
        y, cache = layer(x[:, t : t + 1], cache, start=t)
        steps.append(y)
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=1e-10, atol=1e-10)
    # the causal row-by-row kernel computes the same thing as the masked dense one
    causal, _ = layer(x, mode="causal")
    torch.testing.assert_close(causal, full, rtol=1e-10, atol=1e-10)


def test_mla_bf16_within_tolerance():
    layer = mla()
    x = torch.randn(2, 9, 48, dtype=torch.float64)
    layer.impl = "naive"
    ref, _ = layer(x)
    low = layer.to(torch.bfloat16)
    for impl in IMPLS:
        low.impl = impl
        low.merge_weights()
        out, _ = low(x.to(torch.bfloat16))
        # bf16 keeps 8 bits of mantissa; the implementations round differently
        torch.testing.assert_close(out.double(), ref, rtol=0.05, atol=0.05)


@pytest.mark.parametrize("n_kv", [4, 2, 1])
@pytest.mark.parametrize("window", [None, 3])
def test_mha_decode_equals_prefill(n_kv, window):
    torch.manual_seed(1)
    layer = MHAReference(32, 4, n_kv, 8, window=window).double()
    x = torch.randn(2, 8, 32, dtype=torch.float64)
    full, _ = layer(x, mode="causal")
    if window is None:
        dense, _ = layer(x, mode="dense")
        torch.testing.assert_close(dense, full)
    band, _ = layer(x, mode="band")
    torch.testing.assert_close(band, full)
    cache, steps = None, []
    for t in range(8):
        y, cache = layer(x[:, t : t + 1], cache, start=t)
        steps.append(y)
        assert cache.length == (t + 1 if window is None else min(t + 1, window))
    torch.testing.assert_close(torch.cat(steps, 1), full)


def test_gqa_equals_mha_with_repeated_heads():
    """GQA is MHA whose KV heads are shared: repeat the K/V weights and the outputs match."""
    torch.manual_seed(2)
    gqa = MHAReference(32, 4, 2, 8).double()
    mha = MHAReference(32, 4, 4, 8).double()
    with torch.no_grad():
        mha.q_proj.weight.copy_(gqa.q_proj.weight)
        mha.o_proj.weight.copy_(gqa.o_proj.weight)
        for name in ("k_proj", "v_proj"):
            w = getattr(gqa, name).weight.view(2, 8, 32)
            getattr(mha, name).weight.copy_(w.repeat_interleave(2, 0).reshape(32, 32))
    x = torch.randn(2, 5, 32, dtype=torch.float64)
    torch.testing.assert_close(gqa(x)[0], mha(x)[0])
