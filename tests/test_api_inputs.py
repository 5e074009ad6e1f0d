"""What the public functions accept: a single string where a list is taken is one item (not a
sequence of characters); errors name the argument (and the path the caller gave); bad input is
refused by name, not accepted silently or left to a raw numpy error; ``cache_spec`` takes a
ModelConfig; ``points_missing_both_targets`` is an attribute; a flow-style YAML model file
loads. Each test failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from reference_data import MEASURED

import mlacalc
from mlacalc.words.errors import ConfigError, InvalidArgumentError, UnknownDtypeError

#: a measured table whose fit is quick (two all-reduce classes: 0.08 s of CPU; A100's mla_bmm
#: table took 2.2 s a fit, four fits a test): the tests read how a path is taken, not the fit
ONE_SET = MEASURED / "a100_sxm/comm/trtllm/1.0.0/custom_allreduce_perf.parquet"
SHIPPED = Path(mlacalc.__file__).parent / "data" / "models"
SEARCH = dict(isl=1000, osl=200)


# ---- 1. a str (or os.PathLike) is one item, not a sequence of characters


@pytest.mark.parametrize("path", [str(ONE_SET), ONE_SET])
def test_calibrate_takes_one_path_as_one_measured_set(path):
    pytest.importorskip("pyarrow")  # reading parquet tables needs the measured extra
    one = mlacalc.calibrate(path, use_scipy=False)
    listed = mlacalc.calibrate([path], use_scipy=False)
    assert one.classes == listed.classes
    assert one.fitted_on == listed.fitted_on


def test_calibrate_of_a_missing_path_names_the_path_not_its_first_character(tmp_path):
    missing = tmp_path / "nothere"
    with pytest.raises(ConfigError) as err:
        mlacalc.calibrate(str(missing))
    assert str(missing) in str(err.value)
    with pytest.raises(InvalidArgumentError, match=r"measured_sets: is empty"):
        mlacalc.calibrate([])


def test_search_takes_one_string_as_a_list_of_one():
    r = mlacalc.search("llama-3-8b", "H100-SXM", 1, kv_dtypes="fp8", modes="aggregated",
                       overlaps="none", weight_dtypes="bf16", batches=8, **SEARCH)  # fmt: skip
    assert r.points
    assert {p["kv_dtype"] for p in r.points} == {"fp8"}
    assert {p["mode"] for p in r.points} == {"aggregated"}
    # the grid is the one batch; the best there is refined past it, up to twice it
    assert min(p["batch_per_group"] for p in r.points) == 8
    assert max(p["batch_per_group"] for p in r.points) <= 16


def test_validate_takes_one_bench_file_as_a_list_of_one():
    sidecar = next((Path(mlacalc.__file__).parent / "data" / "measurements").glob("*.json"))
    (one,) = mlacalc.validate(str(sidecar))
    (listed,) = mlacalc.validate([sidecar])
    assert one.to_dict() == listed.to_dict()


def test_report_takes_one_phase_and_one_model_as_lists_of_one():
    from mlacalc.report import compare_rows, model_report

    one = model_report("llama-3-8b", phases="decode")
    assert [r["phase"] for r in one["attention"]] == ["decode"]
    assert one["attention"] == model_report("llama-3-8b", phases=["decode"])["attention"]
    kw = dict(seq_len=4096, batch=1, kv_dtype="bf16")
    (row,) = compare_rows("llama-3-8b", **kw)
    assert row == compare_rows([mlacalc.load_model("llama-3-8b")], **kw)[0]


# ---- 2. errors name the argument (and the path the caller gave)


@pytest.mark.parametrize(
    ("kw", "argument"), [({"dtype": "fp9"}, "dtype"), ({"weight_dtype": "int3"}, "weight_dtype")]
)
def test_predict_time_unknown_dtype_names_its_argument(kw, argument):
    with pytest.raises(UnknownDtypeError) as err:
        mlacalc.predict_time("llama-3-8b", "H100-SXM", "decode", 1024, **kw)
    assert str(err.value).startswith(f"{argument}: unknown dtype")


def test_predict_time_unreadable_calibration_names_the_argument():
    with pytest.raises(InvalidArgumentError) as err:
        mlacalc.predict_time("llama-3-8b", "H100-SXM", "decode", 1024, calibration="nope")
    assert str(err.value).startswith("calibration: nope: cannot be read")
    assert "mlacalc bench" in str(err.value)
    with pytest.raises(InvalidArgumentError, match=r"calibration: must be a Calibration"):
        mlacalc.predict_time("llama-3-8b", "H100-SXM", "decode", 1024, calibration=3)


def test_validate_names_the_path_it_was_given(tmp_path):
    with pytest.raises(ConfigError) as err:
        mlacalc.validate(["/nonexistent.csv"])
    assert "/nonexistent.csv" in str(err.value) and ".json" not in str(err.value).split(":")[0]
    lone = tmp_path / "rows.csv"  # a .csv without its sidecar
    lone.write_text("model\n")
    with pytest.raises(ConfigError, match=r"has no rows.json sidecar beside it"):
        mlacalc.validate([lone])


# ---- 3. bad input refused, naming the argument


@pytest.mark.parametrize("option", ["batches", "kv_dtypes", "modes", "overlaps", "gpus"])
def test_search_refuses_an_empty_list(option):
    kw = {option: ()} if option != "gpus" else {}
    args = ("llama-3-8b", "H100-SXM", *([()] if option == "gpus" else [1]))
    with pytest.raises(InvalidArgumentError, match=f"^{option}: is empty"):
        mlacalc.search(*args, **kw, **SEARCH)


def test_search_refuses_bad_batches_and_overlaps():
    with pytest.raises(InvalidArgumentError, match=r"^batches: must be a positive integer"):
        mlacalc.search("llama-3-8b", "H100-SXM", 1, batches=(0, 4), **SEARCH)
    with pytest.raises(InvalidArgumentError, match=r"^overlaps: unknown overlap 'tb0'"):
        mlacalc.search("llama-3-8b", "H100-SXM", 1, overlaps=("tb0",), **SEARCH)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "1", True])
def test_predict_time_refuses_a_bad_launch_latency(bad):
    with pytest.raises(InvalidArgumentError, match=r"^launch_latency_s: must be a finite"):
        mlacalc.predict_time(
            "llama-3-8b", "H100-SXM", "decode", 1024, mode="unfused", launch_latency_s=bad
        )
    zero = mlacalc.predict_time(
        "llama-3-8b", "H100-SXM", "decode", 1024, mode="unfused", launch_latency_s=0.0
    )
    assert zero.seconds > 0


def test_sweep_arrays_that_do_not_broadcast_are_named():
    m = mlacalc.load_model("llama-3-8b")
    with pytest.raises(InvalidArgumentError) as err:
        mlacalc.sweep(m, "kv_cache_bytes", seq_len=np.arange(1, 4), batch=np.arange(1, 3))
    assert str(err.value).startswith("batch: has shape (2,)")
    assert "seq_len of shape (3,)" in str(err.value)
    grid = mlacalc.sweep(m, "kv_cache_bytes", seq_len=np.arange(1, 4)[:, None],
                         batch=np.arange(1, 3))  # fmt: skip
    assert grid.shape == (3, 2)
    assert grid[2, 1] == mlacalc.kv_cache_bytes(m, 3, batch=2)


def test_sweep_refuses_a_field_the_model_does_not_use():
    with pytest.raises(InvalidArgumentError, match=r"^kv_lora_rank: is not a dimension of"):
        mlacalc.sweep("llama-3-70b", "kv_cache_bytes", seq_len=10, kv_lora_rank=np.array([256]))
    with pytest.raises(InvalidArgumentError, match=r"^num_key_value_heads: is not a dimension"):
        mlacalc.sweep("deepseek-v3", "kv_cache_bytes", seq_len=10, num_key_value_heads=8)
    with pytest.raises(InvalidArgumentError, match=r"^q_lora_rank: .*query compression"):
        mlacalc.sweep("deepseek-v2-lite", "attention_flops", seq_len=10, q_lora_rank=512)
    # the fields a model has still sweep
    out = mlacalc.sweep("deepseek-v3", "kv_cache_bytes", seq_len=10, kv_lora_rank=[256, 512])
    assert out.shape == (2,)


def test_sweep_refuses_kv_heads_that_do_not_divide_the_heads():
    with pytest.raises(InvalidArgumentError, match=r"^num_key_value_heads: .*must divide"):
        mlacalc.sweep("llama-3-70b", "kv_cache_bytes", seq_len=10, num_key_value_heads=[3])
    with pytest.raises(InvalidArgumentError, match=r"^num_attention_heads: .*must divide"):
        mlacalc.sweep("llama-3-70b", "kv_cache_bytes", seq_len=10, num_attention_heads=[12])
    ok = mlacalc.sweep("llama-3-70b", "kv_cache_bytes", seq_len=10, num_key_value_heads=[1, 64])
    m = mlacalc.load_model("llama-3-70b")
    assert ok[1] == mlacalc.kv_cache_bytes(m.with_changes(num_key_value_heads=64), 10)


# ---- 4. cache_spec and layer_pattern take a ModelConfig (the docs write cache_spec(config))


@pytest.mark.parametrize("name", ["llama-3-8b", "gemma-3-1b", "deepseek-v3", "qwen3-next-80b-a3b"])
def test_cache_spec_takes_a_model_config(name):
    from mlacalc.models.patterns import cache_spec, layer_pattern

    m = mlacalc.load_model(name)
    spec = cache_spec(m)
    assert spec == cache_spec(m.to_dict())
    assert sum(spec.model_bytes(layer_pattern(m), 4096).values()) == mlacalc.kv_cache_bytes(m, 4096)
    with pytest.raises(InvalidArgumentError, match=r"^config: must be a ModelConfig"):
        cache_spec(3)


# ---- 5. the documented name of the count of points missing both targets


def test_points_missing_both_targets_is_an_attribute():
    r = mlacalc.search("llama-3-8b", "H100-SXM", 1, ttft=1e-4, tpot=1e-4, batches=(1, 64),
                       **SEARCH)  # fmt: skip
    assert r.points_missing_both_targets == r.missing_both == len(r.points) > 0
    assert r.to_dict()["points_missing_both_targets"] == r.points_missing_both_targets


# ---- 6. the suggested plan command's concurrency reads back as the point's


def test_plan_command_concurrency_is_rounded_and_reproduces_the_point(run):
    """Was: a reproduce command carried ``--concurrency 517.9548047710623``. The printed figure
    is rounded (to within a quarter of CONCURRENCY_SNAP) and plan reads it as the whole decode
    batch's in-flight count, so the command gives the point's figures exactly, for every point
    the search vouches for (the best and the frontier)."""
    from mlacalc.serving.search_command import concurrency_word as _concurrency
    from mlacalc.serving.search_command import plan_command

    assert _concurrency(128.0) == "128"
    assert _concurrency(521.4663596440286) == "521.47"
    assert _concurrency(517.9548047710623) == "517.95"
    assert _concurrency(1.0184619) == "1.01846"
    r = mlacalc.search("llama-3-8b", "H100-SXM", [1, 2], tpot=0.02, **SEARCH)
    # the points the search vouches for (search.settle: the best, which the command is printed
    # for, and the frontier): another point is checked on the searched batches only, and where
    # a step's tiles make the decode rate fall with the batch (Llama-3-8B's head at 385 rows,
    # +26%) plan's closed loop can settle at a smaller batch with the rest queued
    shown = [p for p in r.points if p["on_frontier"] or p is r.best]
    disaggregated = [p for p in shown if p["mode"] == "disaggregated"]
    assert len(disaggregated) >= 3
    for p in disaggregated[:: max(len(disaggregated) // 6, 1)]:
        cmd = plan_command("llama-3-8b", "H100-SXM", r, p).split()
        word = cmd[cmd.index("--concurrency") + 1]
        assert len(word.split(".")[-1]) <= 6 and float(word) != p["concurrency"]
        got = json.loads(run(*cmd[1:], "--format", "json")[0])
        for key in ("ttft_s", "tpot_s", "output_tokens_per_s_per_gpu"):
            assert got[key] == pytest.approx(p[key], rel=1e-12, abs=0), (key, " ".join(cmd))


# ---- 7. a .yaml file is YAML, flow style included


def test_flow_style_yaml_model_file_loads(tmp_path):
    data = yaml.safe_load((SHIPPED / "llama-3-8b.yaml").read_text())
    flow = tmp_path / "flow.yaml"
    flow.write_text(yaml.safe_dump(data, default_flow_style=True))
    assert flow.read_text().startswith("{")
    m = mlacalc.load_model(str(flow))
    ref = mlacalc.load_model("llama-3-8b")
    assert mlacalc.kv_cache_bytes(m, 4096) == mlacalc.kv_cache_bytes(ref, 4096)
    assert mlacalc.param_counts(m) == mlacalc.param_counts(ref)
    # JSON in a .yaml file still reads (with JSON's messages), broken flow YAML says YAML
    as_json = tmp_path / "json.yaml"
    as_json.write_text(json.dumps(data))
    assert mlacalc.load_model(str(as_json)).hidden_size == ref.hidden_size
    broken = tmp_path / "broken.yml"
    broken.write_text("{name: x, hidden_size: [1, 2}")
    with pytest.raises(ConfigError, match=r"is not valid YAML"):
        mlacalc.load_model(str(broken))
