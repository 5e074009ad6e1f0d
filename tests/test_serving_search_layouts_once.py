"""Each distinct layout is timed once: DP-attention with one attention group a stage is plain
TP (LayoutLimits.breaks reads it so), the same layout and figures as DP-attention off; the
search's own layouts had each such one twice (a review: TP4 PP2 EP4 DeepSeek-V3 on 8 H200,
164 points with DP-attention on, 164 off, identical)."""

from __future__ import annotations

from mlacalc import load_model
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving.search_space import LayoutLimits, candidate_layouts

V3 = load_model("deepseek-v3")
H200 = load_hardware("H200")


def _layouts(gpus: int, limits: LayoutLimits | None = None) -> list:
    kw = {"limits": limits} if limits is not None else {}
    return candidate_layouts(V3, H200, gpus, None, 10**15, **kw)


def test_no_layout_is_dp_attention_over_one_group():
    """8 H200: 20 layouts (27 before: TP8 and TP8 EP8 at one stage, TP4 PP2, TP4 PP2 EP4,
    TP2 PP4, TP2 PP4 EP2 and TP1 PP8 twice); 16: 24 (30)."""
    for gpus, count in ((8, 20), (16, 24)):
        lays = _layouts(gpus)
        assert not [lay for lay in lays if lay.dp_attention and lay.dp == 1]
        keys = [
            (lay.tp, lay.dp, lay.pp, lay.ep, lay.dp_attention, lay.redundant_experts)
            for lay in lays
        ]
        assert len(keys) == len(set(keys)) == count


def test_a_dp_attention_limit_still_finds_pipeline_stages_with_attention_groups():
    """--dp-attention on (with --pp 2) means attention groups sharing the experts, more than
    one a stage, as before: those layouts are kept; one group a stage is plain TP, ruled out
    by "on" before and now alike."""
    limits = LayoutLimits(pp=(2,), dp_attention="on")
    lays = _layouts(8, limits)
    assert lays and all(lay.dp_attention and lay.dp > 1 and lay.pp == 2 for lay in lays)
    assert {(lay.tp, lay.ep) for lay in lays} >= {(1, 4), (2, 4)}
