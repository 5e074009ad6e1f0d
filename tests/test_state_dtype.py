"""`--state-dtype`: a linear-attention or Mamba layer's recurrent state kept in bf16.

The Hugging Face reference keeps the recurrent state in float32, and the product sized it so
with no way to say otherwise, while a serving engine may keep it in bf16 (for Qwen3-Next's 36
Gated DeltaNet layers that is 37.7 MB of a sequence's 78 MB of state). These checks count the
state by hand from each model's shipped YAML (read with yaml, not the product's loader) and
hold report, plan and search to it.
"""

import json
from pathlib import Path

import pytest
import yaml

from mlacalc import plan, search
from mlacalc.words.errors import InvalidArgumentError

MODELS = Path(__file__).resolve().parent.parent / "mlacalc" / "data" / "models"


def _fields(name):
    return yaml.safe_load((MODELS / f"{name}.yaml").read_text())


def _by_kind(run, name, *extra):
    doc = json.loads(run("report", name, "-s", 8192, "--format", "json", *extra)[0])
    return doc, {k["kind"]: k["bytes"] for k in doc["kv_cache"][0]["by_kind"]}


def _state_elements(name):
    """(convolution window elements, recurrent state elements, layers) of one layer kind."""
    f = _fields(name)
    if "linear_num_value_heads" in f:  # Gated DeltaNet: q, k, v windows; a d_k x d_v state a head
        hk, hv = f["linear_num_key_heads"], f["linear_num_value_heads"]
        dk, dv = f["linear_key_head_dim"], f["linear_value_head_dim"]
        conv = (2 * hk * dk + hv * dv) * f["linear_conv_kernel_dim"]
        return "linear", conv, hv * dk * dv
    if "mamba_num_heads" in f:  # Mamba-2: x, B, C windows; a head_dim x N state a head
        h, p, n, g = (
            f[k] for k in ("mamba_num_heads", "mamba_head_dim", "ssm_state_size", "mamba_n_groups")
        )
        return "full+mamba", (h * p + 2 * g * n) * f["mamba_d_conv"], h * p * n
    inner = f["mamba_inner_size"]  # Mamba-1: I channels, an N-wide state each
    return "mamba1", inner * f["mamba_d_conv"], inner * f["ssm_state_size"]


@pytest.mark.parametrize("name", ["qwen3-next-80b-a3b", "falcon-h1-34b", "jamba-1.5-mini"])
def test_report_state_bf16_is_the_hand_count(run, name):
    kind, conv, state = _state_elements(name)
    _, fp32 = _by_kind(run, name)
    doc, bf16 = _by_kind(run, name, "--state-dtype", "bf16")
    assert doc["settings"]["state_dtype"] == "bf16"
    # the difference is the state alone, 2 bytes an element fewer, in every layer of the kind
    saved = fp32[kind] - bf16[kind]
    assert saved % (2 * state) == 0
    layers = saved // (2 * state)
    if kind != "full+mamba":  # a Mamba-2 mixer beside attention: its KV rows are in the kind too
        assert bf16[kind] == layers * (conv * 2 + state * 2)
        assert fp32[kind] == layers * (conv * 2 + state * 4)
    expected = {"qwen3-next-80b-a3b": 36, "falcon-h1-34b": 72, "jamba-1.5-mini": 28}[name]
    assert layers == expected


def test_report_names_the_state_only_where_there_is_one(run):
    doc = json.loads(run("report", "qwen3-next-80b-a3b", "--format", "json")[0])
    assert doc["settings"]["state_dtype"] == "fp32"
    out, _ = run("report", "qwen3-next-80b-a3b", "--state-dtype", "bf16")
    assert "recurrent state bf16" in out.splitlines()[1]
    doc = json.loads(run("report", "llama-3.1-8b", "--format", "json")[0])
    assert doc["settings"]["state_dtype"] is None
    out, err = run("report", "llama-3.1-8b", "--state-dtype", "bf16")
    assert "--state-dtype does not change Llama" in err and "ignored" in err
    assert "recurrent state" not in out


def test_plan_state_bf16_frees_the_state_bytes():
    _, _, state = _state_elements("qwen3-next-80b-a3b")
    args = dict(tp=2, isl=8000, osl=1000, concurrency=256, engine="vllm")
    a = plan("qwen3-next-80b-a3b", "H200", 2, **args)
    b = plan("qwen3-next-80b-a3b", "H200", 2, state_dtype="bf16", **args)
    assert (a.state_dtype, b.state_dtype) == ("fp32", "bf16")
    # each rank keeps half the value heads' states (tp 2): 36 layers x that x 2 bytes fewer
    freed = a.kv_bytes_fixed_per_sequence_per_gpu - b.kv_bytes_fixed_per_sequence_per_gpu
    assert freed == 36 * (state // 2) * 2
    assert b.max_batch > a.max_batch
    assert b.tpot_s < a.tpot_s  # the decode step reads and writes half the state's bytes
    assert plan("llama-3.1-8b", "H200", 1, seq_len=4096).state_dtype is None


def test_search_and_its_plan_command_agree(run):
    args = [
        "qwen3-next-80b-a3b",
        "-H",
        "H200",
        "--gpus",
        "2",
        "--isl",
        "8000",
        "--osl",
        "1000",
        "--tpot",
        "50ms",
        "--engine",
        "vllm",
        "--kv-dtypes",
        "bf16",
        "--modes",
        "aggregated",
    ]
    doc = json.loads(run("search", *args, "--state-dtype", "bf16", "--format", "json")[0])
    assert doc["state_dtype"] == "bf16"
    fp32 = search(
        "qwen3-next-80b-a3b",
        "H200",
        [2],
        isl=8000,
        osl=1000,
        tpot=0.05,
        engine="vllm",
        kv_dtypes=("bf16",),
        modes=("aggregated",),
    )
    assert fp32.state_dtype is None
    assert doc["best"]["output_tokens_per_s"] > fp32.best["output_tokens_per_s"]
    out, _ = run("search", *args, "--state-dtype", "bf16")
    command = next(line for line in out.replace("\n", " ").split("The same figures: ")[1:])
    assert "--state-dtype bf16" in command


@pytest.mark.parametrize("value", ["fp8", "int8", "", "float32", "BF16x", "fp16"])
def test_state_dtype_bad_values_are_one_line(run, value):
    _, err = run("report", "qwen3-next-80b-a3b", "--state-dtype", value, code=2)
    assert "--state-dtype" in err and "fp32" in err and "bf16" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("value", ["fp8", 16, "", None.__class__.__name__, "fp16"])
def test_state_dtype_api_refuses_by_name(value):
    with pytest.raises(InvalidArgumentError, match="state_dtype: use one of fp32, bf16"):
        plan("qwen3-next-80b-a3b", "H200", 2, tp=2, seq_len=8192, state_dtype=value)


def test_roofline_state_bf16_moves_fewer_bytes(run):
    args = [
        "qwen3-next-80b-a3b",
        "-H",
        "H200",
        "--seq-len",
        "8k",
        "--batch",
        "64",
        "--scope",
        "model",
        "--engine",
        "vllm",
        "--phase",
        "decode",
        "--format",
        "json",
    ]
    doc = json.loads(run("roofline", *args)[0])
    fp32 = doc["predictions"][0]["seconds"]
    assert doc["state_dtype"] == "fp32"
    doc = json.loads(run("roofline", *args, "--state-dtype", "bf16")[0])
    assert doc["state_dtype"] == "bf16" and doc["predictions"][0]["seconds"] < fp32
    out, _ = run("roofline", *args[:-2], "--state-dtype", "bf16")
    assert out.splitlines()[0].endswith("on H200, recurrent state bf16")
    assert (
        json.loads(run("roofline", "llama-3-8b", "-H", "H200", "--format", "json")[0])[
            "state_dtype"
        ]
        is None
    )
