"""A head_dim the config.json leaves out, and a change of the heads: the file route (edited to
48 heads over hidden 8,192: floored to 170) and the --set route (head_dim kept at 128) each
say so, naming head_dim and the fix. trial10: the file route said only a derived line, the
--set route nothing, and the two gave 435,200 against 327,680 B a token. Each failed before."""

from __future__ import annotations

import json
import subprocess
import sys

from reference_data import HF_CONFIGS

import mlacalc
from mlacalc.models.architecture import count_warnings


def _llama70b(tmp_path, **changes) -> str:
    data = json.loads((HF_CONFIGS / "llama-3.1-70b.config.json").read_text())
    data.update(changes)
    path = tmp_path / "edited.config.json"
    path.write_text(json.dumps(data))
    return str(path)


def _stderr(*args: str) -> str:
    run = subprocess.run(
        [sys.executable, "-m", "mlacalc", "report", *args], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    return run.stderr


def test_the_file_route_warns_a_floored_head_dim_on_the_command_line(tmp_path):
    err = _stderr(_llama70b(tmp_path, num_attention_heads=48))
    assert "head_dim 170 is hidden_size 8,192 / 48 heads floored" in err
    assert "state head_dim" in err


def test_the_set_route_says_head_dim_is_kept_and_how_to_choose(tmp_path):
    err = _stderr(_llama70b(tmp_path), "--set", "num_attention_heads=48")
    assert "head_dim stays 128" in err and "--set head_dim=128" in err and "170" in err
    assert "head_dim" not in _stderr(
        _llama70b(tmp_path), "--set", "num_attention_heads=48", "--set", "head_dim=128"
    )


def test_a_given_field_drops_its_derived_note_and_unchanged_heads_say_nothing(tmp_path):
    m = mlacalc.load_model(_llama70b(tmp_path))
    assert any(str(n).startswith("head_dim = 128") for n in m.derived)
    assert not count_warnings(m)
    given = m.with_changes(num_attention_heads=48, head_dim=128)
    assert not any(str(n).startswith("head_dim = ") for n in given.derived)
    assert not any("head_dim" in w for w in count_warnings(given))
    kept = m.with_changes(num_attention_heads=32)  # divides: the file edited so gives 256
    assert any("head_dim stays 128" in w and "= 256" in w for w in count_warnings(kept))
