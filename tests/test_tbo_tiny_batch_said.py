"""Two-batch overlap at one sequence or fewer per attention group: a batch that small does not
split into two micro-batches (SGLang runs it without the overlap, from recall), said once
(a new-user trial: GLM-5.1 on 72 GB200 at one sequence a rank, a step 16.28 -> 26.17 ms with
no word)."""

from __future__ import annotations

from mlacalc.serving.plan import plan

LAYOUT = dict(dp_attention=True, ep=72, redundant_experts=32, weight_dtype="fp8", kv_dtype="fp8")
ASK = dict(isl=4000, osl=1000, engine="sglang", **LAYOUT)


def _said(p) -> list[str]:
    return [w for w in p.warnings if w.startswith("two-batch overlap with")]


def test_tbo_at_one_sequence_a_group_says_it_cannot_split():
    (said,) = _said(plan("glm-5.1", "GB200", 72, concurrency=72, overlap="tbo", **ASK))
    assert "1 running per attention group" in said and "--overlap none" in said
    assert not _said(plan("glm-5.1", "GB200", 72, concurrency=72, **ASK))
    assert not _said(plan("glm-5.1", "GB200", 72, concurrency=720, overlap="tbo", **ASK))
    # the capacity view too: a batch of 72 over 72 groups
    p = plan("glm-5.1", "GB200", 72, batch=72, seq_len=4096, overlap="tbo", **LAYOUT)
    assert len(_said(p)) == 1
