"""The warning on an AMD GPU says that the engines' figures are not told apart there (the same
NVIDIA-fitted efficiencies scaled by the datasheet) and the least error to expect: the README's
cross-generation figures (trial12: SGLang and vLLM gave identical MI300X figures, unsaid, and no
error bound)."""

from __future__ import annotations

from pathlib import Path

from mlacalc.serving.plan import plan
from mlacalc.serving.provenance import CROSS_GENERATION_ERRORS

ASK = dict(isl=1000, osl=200, concurrency=8)
README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_amd_warning_says_engines_alike_and_the_least_error():
    for engine in ("sglang", "vllm", "trtllm"):
        p = plan("llama-3-8b", "MI300X", 1, engine=engine, **ASK)
        (said,) = [w for w in p.warnings if w.startswith("MI300X is not a fitted device")]
        assert "the engines are not told apart there" in said
        assert "A100 from H100 9.2% median / 28% p90, H100 from A100 10.3% / 33%" in said
        assert "not told apart" in p.prediction["expected_error_source"]
    h = plan("llama-3-8b", "H200", 1, **ASK)
    assert not [w for w in h.warnings if "not told apart" in w]


def test_the_cross_generation_figures_are_the_readmes():
    pooled = [r for r in README.read_text().splitlines() if r.startswith("| pooled (every H100")]
    assert pooled, "README's pooled row moved: update CROSS_GENERATION_ERRORS' source"
    cells = [c.strip() for c in pooled[0].split("|")[1:-1]]
    (a, a90), (h, h90) = CROSS_GENERATION_ERRORS.values()
    assert cells[3] == f"{a:g}% / {a90:g}%" and cells[4] == f"{h:g}% / {h90:g}%"
