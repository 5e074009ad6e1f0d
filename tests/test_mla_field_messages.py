"""MLA fields' messages say the one real problem (trial10): a RoPE width of 0 said "use null
for none" and null said "is required"; a wrong-typed kv_lora_rank also reported a false
"q_lora_rank is missing". Each test failed before."""

from __future__ import annotations

import json

import pytest
from reference_data import HF_CONFIGS

import mlacalc
from mlacalc import ConfigError


def _lite(**changes) -> dict:
    data = json.loads((HF_CONFIGS / "deepseek-v2-lite.config.json").read_text())
    data.update(changes)
    return data


def _problems(data: dict) -> list[tuple]:
    with pytest.raises(ConfigError) as caught:
        mlacalc.import_hf_config(data, "mla.json")
    return list(caught.value.problems)


@pytest.mark.parametrize("rope", [0, -2, None])
def test_mla_without_rope_says_what_mla_needs_whatever_was_written(rope):
    (problem,) = _problems(_lite(qk_rope_head_dim=rope))
    assert problem[0] == "qk_rope_head_dim"
    assert "at least 2" in problem[1] and "no MLA without RoPE" in problem[1]
    assert "use null for none" not in str(problem) and "is required" not in problem[1]


@pytest.mark.parametrize("rope", [0, None])
def test_set_says_the_same(rope):
    with pytest.raises(ConfigError) as caught:
        mlacalc.load_model("deepseek-v3").with_changes(qk_rope_head_dim=rope)
    assert "at least 2" in str(caught.value) and "use null for none" not in str(caught.value)


@pytest.mark.parametrize("rank", ["512", -1, [512], 0.5])
def test_a_wrong_kv_lora_rank_is_the_one_problem(rank):
    problems = _problems(_lite(kv_lora_rank=rank))
    assert [p[0] for p in problems] == ["kv_lora_rank"], problems


def test_a_good_rank_with_an_absent_q_lora_rank_still_loads():
    data = _lite()
    data.pop("q_lora_rank", None)
    assert mlacalc.import_hf_config(data).kv_lora_rank == 512
