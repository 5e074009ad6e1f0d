"""An MLA latent width no measured kernel has (every MLA row is DeepSeek-V3's 512): its time is
the fitted rule extrapolated, said in the roofline (CLI and app) and the plan, once each (a
new-user trial's kv_lora_rank sweep of 128..1,024 read smooth times with no word)."""

from __future__ import annotations

import pytest

from mlacalc.cli import main
from mlacalc.serving.plan import plan

SAID = "outside the measured MLA rows"


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_roofline_and_plan_say_a_latent_other_than_512_is_extrapolated(capsys):
    args = ["roofline", "minicpm3-4b", "-H", "H100-SXM", "--batch", "16", "--seq-len", "4096"]
    assert main(args) == 0
    out = _flat(capsys.readouterr().out)
    assert out.count(SAID) == 1 and "kv_lora_rank 256" in out
    assert main(["roofline", "glm-5.1", *args[2:]]) == 0
    assert SAID not in _flat(capsys.readouterr().out)
    assert main([*args, "--profile", "roofline"]) == 0  # no fitted rule: nothing to say
    assert SAID not in _flat(capsys.readouterr().out)
    said = [w for w in plan("minicpm3-4b", "H100-SXM", 1, isl=1000, osl=100).warnings if SAID in w]
    assert len(said) == 1
    assert not [w for w in plan("deepseek-v2-lite", "H100-SXM", 1).warnings if SAID in w]


def test_the_app_roofline_says_it_for_a_what_if_rank():
    pytest.importorskip("streamlit")
    from test_app import run

    at = run("Roofline", model="deepseek-v3", whatif="1", d_c="256")
    assert [c for c in at.caption if "kv_lora_rank 256" in c.value and SAID in c.value]
    at = run("Roofline", model="deepseek-v3")
    assert not [c for c in at.caption if SAID in c.value]


def test_the_latent_note_is_for_cores_that_read_the_latent_once(capsys):
    """A review: `--impl naive` (an expanded MHA core, no latent read) said it, and `--impl all`
    said it once per implementation (4 times)."""
    args = ["roofline", "minicpm3-4b", "-H", "H100-SXM", "--batch", "8", "--seq-len", "4096"]
    for impl, times in (("naive", 0), ("all", 1)):
        assert main([*args, "--impl", impl]) == 0
        assert _flat(capsys.readouterr().out).count(SAID) == times, impl
