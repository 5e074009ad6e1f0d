"""The KV transfer of disaggregated serving: each prefill rank's share of a request's cache in
parallel, through its own link, over NVLink where both pools sit in one scale-up domain."""

import pytest

import mlacalc
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving.comm import kv_transfer
from mlacalc.serving.layout import make_layout
from mlacalc.serving.plan import plan
from mlacalc.timemodel.kernel_time import predict_kernels
from mlacalc.words.dtypes import resolve_kv_layout
from mlacalc.words.kernels import Kernel

LLAMA = dict(isl=32000, osl=500, concurrency=8, weight_dtype="fp8", tp=8)
#: Llama-3.1-70B: 80 layers x 8 K/V heads x 128 x 2 (K, V) x 2 B = 327,680 B a token
ROW = 80 * 8 * 128 * 2 * 2


def _dis(hw: str, **kw):
    args = dict(LLAMA, **kw)
    return plan("llama-3.1-70b", hw, 8, mode="disaggregated", prefill_gpus=8, **args)


def test_tp8_over_the_network_sends_an_eighth_a_rank():
    """B200 HGX, 8 + 8 GPUs in two nodes: each rank's eighth of the K/V heads through its own
    400 Gb/s NIC (50 GB/s at 0.8), not the whole cache through one (262 ms before)."""
    p = _dis("B200")
    share = 32000 * ROW // 8  # 1,310,720,000 B
    assert p.kv_transfer_rank_bytes == share
    assert p.kv_transfer_s == pytest.approx(2.8e-6 + share / (50e9 * 0.8), rel=1e-6)  # 32.77 ms
    assert "network" in p.kv_transfer_link


def test_one_nvl72_rack_sends_over_nvlink():
    """GB200 NVL72: 16 GPUs of the rack's 72 share NVLink, the transfer is the kernel model's
    GPU-to-GPU copy of a rank's share, far below the network's."""
    p, net = _dis("GB200"), _dis("B200")
    hw = load_hardware("GB200")
    share = 32000 * ROW // 8
    k = Kernel("KV", "p2p", "bf16", 0, share, shape={"message_bytes": share, "n_gpus": 2})
    assert p.kv_transfer_s == pytest.approx(predict_kernels([k], hw)[0].seconds, rel=1e-9)
    assert "scale-up" in p.kv_transfer_link and "NVLink" in p.kv_transfer_link
    assert p.kv_transfer_s < share / (hw.scale_up_bytes_per_s * 0.5) < net.kv_transfer_s


def test_mla_latent_bounded_by_the_receiving_rank():
    """MLA's latent is whole on every tensor rank: the prefill ranks split the sending, but
    each decode rank receives the whole latent, which bounds the transfer; PP2 halves it."""
    m = mlacalc.load_model("deepseek-v3")
    hw, kv = load_hardware("B200"), resolve_kv_layout("bf16")
    row = 61 * 576 * 2  # 70,272 B a token
    p_lay = make_layout(m, 8, tp=8, ep=8)
    t = kv_transfer(hw, m, kv, p_lay, make_layout(m, 8, tp=8, ep=8), 1000)
    assert t.rank_bytes == 1000 * row and t.total_bytes == 1000 * row
    # a DP-attention decode rank holds the latent alone, a PP2 one its stage's layers
    t2 = kv_transfer(hw, m, kv, p_lay, make_layout(m, 16, tp=8, pp=2, ep=8), 1000)
    assert t2.rank_bytes == 1000 * 31 * 576 * 2  # the fuller stage: 31 of 61 layers
    assert t2.seconds < t.seconds


def test_the_words_name_the_link_and_a_ranks_bytes():
    """Plan.disaggregated_parts, the words `mlacalc plan` prints and the app shows: the
    transfer's time, then its link (NVLink in one NVL72 rack, the NIC across HGX nodes) with
    a rank's bytes (1,310,720,000 B = 1.22 GiB), then the two pools' rates; nothing
    aggregated."""
    for hw, link in (("GB200", "over the scale-up link: NVLink"), ("B200", "over the network")):
        p = _dis(hw)
        labels = [k for k, _ in p.disaggregated_parts()]
        assert labels == [
            "KV transfer per request",
            "link",
            "prefill pool's rate",
            "decode pool's rate at its largest batch",
        ]
        words = dict(p.disaggregated_parts())
        assert words["KV transfer per request"] == f"{p.kv_transfer_s * 1e3:,.2f} ms"
        assert words["link"].startswith(link) and words["link"].endswith(
            ", at most 1.22 GiB a rank"
        )
    assert plan("llama-3.1-70b", "B200", 8, **LLAMA).disaggregated_parts() == []
