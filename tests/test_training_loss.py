"""The loss on the last pipeline stage: the cross-entropy on the logits upcast to fp32
(Megatron-LM's vocab-parallel cross-entropy, from recall), its softmax kept for the backward
(memory) and its element-wise passes (time)."""

from __future__ import annotations

import pytest

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.models.loading import load_model
from mlacalc.timemodel.kernel_time import predict_kernels
from mlacalc.training.cost import training_cost
from mlacalc.training.memory import layer_activations
from mlacalc.training.step import LOSS_BYTES_PER_LOGIT, loss_kernels, make_layout


def test_the_softmax_of_the_loss_is_kept_in_fp32_under_bf16():
    """4 bytes a logit saved for the backward whatever the activation dtype (it was 2 in
    bf16: the log-probabilities at the activations' width)."""
    m = load_model("llama-3.1-8b")
    acts = {a.name: a for a in layer_activations(m, 4096, 1, "expanded", "none", "bf16")}
    assert acts["log_probabilities"].bytes == 4096 * m.vocab_size * 4


def test_the_loss_kernels_arithmetic():
    """A GPU's slice of the logits (``micro_batch x seq_len / cp`` tokens x ``V / tp``) at
    38 bytes a logit forward and 14 backward (32 and 8 with no casts under fp32)."""
    m = load_model("llama-3.1-8b")
    lay = make_layout(m, tp=4, cp=2, micro_batch=2, seq_len=8192)
    f, b = loss_kernels(m, lay, 8192, "bf16")
    logits = 2 * 8192 // 2 * (m.vocab_size // 4)
    assert (f.bytes, b.bytes) == (38 * logits, 14 * logits)
    assert f.kind == b.kind == "elementwise" and f.shape == {"elements": logits}
    f32 = loss_kernels(m, lay, 8192, "fp32")
    assert [k.bytes for k in f32] == [32 * logits, 8 * logits]
    assert LOSS_BYTES_PER_LOGIT["bf16"] == (38, 14)


def test_the_last_stage_times_the_loss():
    """Llama-3.1-8B, PP4 on H100: the last stage's forward is the middle stages' plus the
    final norm, the head GEMM and the loss; its forward exceeds theirs by at least the loss's
    predicted time (it did not count it before), which is the larger part at a 128k
    vocabulary."""
    c = training_cost("llama-3.1-8b", 8192, hardware="H100", pp=4, global_batch=8)
    first, mid, _, last = c.time.stages
    m = load_model("llama-3.1-8b")
    hw = load_hardware("H100")
    f, b = loss_kernels(m, c.time.layout, 8192, "bf16")
    loss_f, loss_b = (t.seconds for t in predict_kernels([f, b], hw, c.time.profile))
    assert last.forward_s - mid.forward_s > loss_f > 0.010
    assert last.backward_s - mid.backward_s > loss_b
    assert c.time.slowest_stage == 3
    assert first.forward_s == pytest.approx(mid.forward_s, rel=0.01)
