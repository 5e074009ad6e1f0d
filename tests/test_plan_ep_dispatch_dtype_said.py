"""An EP dispatch sized in one dtype and timed by a fit of another dtype's class says both in
one breath: Kimi-K2.6 NVFP4 under SGLang on B200 read "EP dispatch sized in bf16 (2 B a
value)" beside "EP dispatch ... timed by the dispatch:fp8 fit", which read as a contradiction.
The step's bf16 bytes are timed at the fp8 fit's rates; the stand-in line says so."""

from reference_data import HF_CONFIGS_2

import mlacalc

KIMI = HF_CONFIGS_2 / "nvidia--Kimi-K2.6-NVFP4.config.json"


def test_the_dispatch_timed_by_another_dtypes_fit_says_it_times_the_sized_bytes():
    p = mlacalc.plan(
        str(KIMI), "B200", 8, dp_attention=True, ep=8, isl=2000, osl=500, concurrency=64,
        engine="sglang",
    )  # fmt: skip
    sized = [w for w in p.warnings if w.startswith("EP dispatch sized in bf16")]
    timed = [w for w in p.warnings if w.startswith("EP dispatch (")]
    assert len(sized) == 1 and len(timed) == 1, p.warnings
    assert "timed by the dispatch:fp8 fit" in timed[0]
    assert "applied to the step's dispatch:bf16 (its bytes as sized" in timed[0]
    # the calibration line said it already; the warning now agrees with it
    assert "the dispatch:fp8 fit timing the step's dispatch:bf16" in p.calibration
    # a stand-in of the step's own class says nothing more (the combine is bf16 both ways)
    (combine,) = [w for w in p.warnings if w.startswith("EP combine (")]
    assert "applied to" not in combine
