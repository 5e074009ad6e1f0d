"""MLA widths above the hidden state they are computed from: a warning naming the field, the
value and the bound (library, command line and app), not silence (DeepSeek-V3 with
kv_lora_rank 20,000 on d = 7,168 printed 2.33 MiB a token with nothing said)."""

import warnings

import pytest
import yaml

import mlacalc
from mlacalc.models.architecture import count_warnings
from mlacalc.words.errors import MlacalcWarning

V3 = mlacalc.load_model("deepseek-v3")


@pytest.mark.parametrize(
    "field, value", [("kv_lora_rank", 100000), ("q_lora_rank", 9000), ("qk_rope_head_dim", 7170)]
)
def test_a_width_above_hidden_size_warns(field, value):
    with pytest.warns(MlacalcWarning) as caught:
        wide = V3.with_changes(**{field: value})
    text = " ".join(str(w.message) for w in caught)
    assert f"{field} {value:,} is above hidden_size 7,168" in text
    extra = f"{value - 7168:,}"
    assert f"at most 7,168 independent dimensions and the extra {extra} hold nothing" in text
    assert count_warnings(wide) == wide.width_warnings() != []


def test_widths_within_hidden_size_are_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error", MlacalcWarning)
        for change in ({"kv_lora_rank": 7168}, {"qk_rope_head_dim": 256}, {"q_lora_rank": 7168}):
            assert V3.with_changes(**change).width_warnings() == []
    every = [mlacalc.load_model(n) for n in mlacalc.shipped_models()]
    assert [m.name for m in every if m.width_warnings()] == []


def test_report_prints_the_warning(run, tmp_path):
    doc = V3.to_dict()
    doc.update(kv_lora_rank=20000, name="dsv3-wide")
    path = tmp_path / "wide.yaml"
    path.write_text(yaml.safe_dump(doc))
    _, err = run("report", str(path), "--seq-len", "1k")
    assert "mlacalc: warning: DeepSeek-V3: kv_lora_rank 20,000 is above hidden_size 7,168" in err


def test_app_shows_the_warning_in_the_main_area():
    pytest.importorskip("streamlit")
    from _helpers import run_app

    at = run_app(model="deepseek-v2-lite", whatif="1", d_c="4096")
    assert any("kv_lora_rank 4,096 is above hidden_size 2,048" in w.value for w in at.warning)
    assert not any("hidden_size" in w.value for w in run_app(model="deepseek-v2-lite").warning)
