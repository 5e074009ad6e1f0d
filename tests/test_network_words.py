"""The notes' words for the links: on GB200 / NVL72 the footer said "collectives within a node
included; traffic between nodes at 80% of the network's ..." where a GB200 node is a 4-GPU
tray and its NVLink domain is 72 GPUs (a new user's trial read a 72-GPU layout as one over the
network). It now names the scale-up domain there, and says when a deployment fits one; an
8-GPU node's words (H100, H200, B200) are unchanged."""

from __future__ import annotations

import pytest

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving.comm import network_words

NODE = (
    "collectives within a node included; traffic between nodes at 80% of the network's "
    "datasheet bandwidth"
)
DOMAIN = (
    "collectives within a scale-up domain (NVLink, 72 GPUs on GB200, 4-GPU nodes) included; "
    "traffic between domains at 80% of the network's datasheet bandwidth"
)


@pytest.mark.parametrize("hw", ["H100-SXM", "H200", "B200"])
def test_eight_gpu_nodes_keep_the_node_words(hw):
    assert network_words(load_hardware(hw), 8) == NODE
    assert network_words(load_hardware(hw), 64) == NODE
    assert network_words(None) == NODE  # no device known: the node's


def test_gb200_names_its_nvlink_domain_and_a_layout_within_one():
    gb = load_hardware("GB200")
    assert gb.gpus_per_node == 4 and gb.scale_up_gpus == 72
    assert network_words(gb, 72) == DOMAIN + (
        "; these 72 GPUs fit one domain: no traffic crosses the network"
    )
    assert network_words(gb, 144) == DOMAIN  # two racks: the network between them
    assert network_words(gb, 1) == DOMAIN + "; one GPU: no traffic crosses the network"
    assert network_words(gb) == DOMAIN


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_plan_and_search_footers_on_gb200_and_h200(run):
    mix = ["--isl", 1000, "--osl", 100, "--concurrency", 16, "--engine", "sglang"]
    out, _ = run("plan", "deepseek-v2-lite", "-H", "GB200", "--gpus", 8, *mix)
    assert DOMAIN + "; these 8 GPUs fit one domain: no traffic crosses the network." in _flat(out)
    assert "within a node" not in _flat(out)
    out, _ = run("plan", "deepseek-v2-lite", "-H", "H200", "--gpus", 8, *mix)
    assert NODE + "." in _flat(out) and "scale-up domain" not in _flat(out)
    # disaggregated: both pools count (8 + 8 within one rack)
    out, _ = run("plan", "deepseek-v2-lite", "-H", "GB200", "--gpus", 8, "--mode",
                 "disaggregated", "--prefill-gpus", 8, *mix)  # fmt: skip
    assert "these 16 GPUs fit one domain" in _flat(out)
    out, _ = run("search", "deepseek-v2-lite", "-H", "GB200", "--gpus", 4, "--tp", 4,
                 "--isl", 1000, "--osl", 100, "--engine", "sglang")  # fmt: skip
    assert DOMAIN + "; these 4 GPUs fit one domain: no traffic crosses the network." in _flat(out)
    out, _ = run("search", "deepseek-v2-lite", "-H", "H200", "--gpus", 4, "--tp", 4,
                 "--isl", 1000, "--osl", 100, "--engine", "sglang")  # fmt: skip
    assert NODE + "." in _flat(out)


def test_train_search_says_a_domain_on_gb200_and_a_node_on_h100(run):
    """train-search keeps tp within the scale-up fabric: GB200's 72 GPUs, which it called a
    node (GB200's node is a 4-GPU tray); H100's 8-GPU node keeps its words."""
    args = ["llama-3.1-8b", "--gpus", "8", "--tp", "3", "--global-batch", "64", "-s", "4k"]
    _, err = run("train-search", *args, "--hw", "GB200", code=2)
    assert "tp within a scale-up domain of 72 GPUs" in err
    _, err = run("train-search", *args, "--hw", "H100", code=2)
    assert "tp within a node of 8 GPUs" in err


def test_app_planner_caption_says_the_links_as_plan_does():
    """The app's planner caption said "communication included" alone: it now says the links
    as plan's footer does, the domain on GB200 and the node on H200."""
    pytest.importorskip("streamlit")
    from _helpers import run_app

    def caption(hw: str) -> str:
        at = run_app("Capacity planner", model="deepseek-v2-lite", hw=hw)
        return next(c.value for c in at.caption if c.value.startswith("Per GPU:"))

    assert DOMAIN + "; these 8 GPUs fit one domain: no traffic crosses the network." in caption(
        "GB200"
    )
    assert caption("H200").endswith(NODE + ".")
