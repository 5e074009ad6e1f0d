"""A config whose name says its weights are quantized (FP8, NVFP4, AWQ, GPTQ, INT4...) but
whose quantization config was not found is sized 16-bit with one warning naming the file to
put beside it (trial: Nemotron-3-Super FP8's config.json alone, 224.76 GiB of bf16 weights,
no word). A mutation suite over the names, where the config is and what it holds; each
warning case failed before."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from mlacalc.cli import cli
from mlacalc.models.loading import load_model
from mlacalc.models.quantization import unread_quantization_warning
from mlacalc.words.errors import MlacalcWarning

REF = Path(__file__).parent / "data"  # the shared configs, as the checkout keeps them
SUPER = "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8"
QWEN = REF / "hf-configs" / "qwen3-8b.config.json"


def _load(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MlacalcWarning)
        return load_model(str(path))


def _qwen(folder: Path, filename: str, **fields) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    data = {**json.loads(QWEN.read_text()), **fields}
    path = folder / filename
    path.write_text(json.dumps(data))
    return path


def test_fp8_export_alone_warns_and_names_the_file(tmp_path):
    config = tmp_path / f"{SUPER}.config.json"
    shutil.copy(REF / "hf-configs-2" / f"{SUPER}.config.json", config)
    said = unread_quantization_warning(_load(config))
    assert "says FP8" in said and "weights sized bf16" in said
    assert str(tmp_path / f"{SUPER}.hf_quant_config.json") in said
    out = CliRunner().invoke(cli, ["report", str(config), "--phase", "decode"])
    assert out.exit_code == 0
    assert "its name says FP8 but no quantization config was found" in out.output
    # with its quant file beside it: read, no warning
    shutil.copy(REF / "hf-configs-2" / f"{SUPER}.hf_quant_config.json", tmp_path)
    assert unread_quantization_warning(_load(config)) == ""


@pytest.mark.parametrize(
    ("folder", "filename", "fields", "mark"),
    [
        ("Qwen3-8B-AWQ", "config.json", {}, "AWQ"),  # the folder's name
        ("plain", "config.json", {"_name_or_path": "org/Qwen3-8B-GPTQ-Int4"}, "GPTQ"),
        ("plain", "qwen3-8b-int4.config.json", {}, "INT4"),
        ("plain", "Qwen3-8B-NVFP4.config.json", {}, "NVFP4"),
        ("plain", "qwen3-8b_fp4.config.json", {}, "FP4"),
        ("plain", "config.json", {"_name_or_path": "/models/Qwen3-8B-FP8-dynamic"}, "FP8"),
    ],
)
def test_each_quantized_name_warns(tmp_path, folder, filename, fields, mark):
    said = unread_quantization_warning(_load(_qwen(tmp_path / folder, filename, **fields)))
    assert f"says {mark} " in said
    beside = (
        "hf_quant_config.json"
        if filename == "config.json"
        else filename.replace(".config.json", ".hf_quant_config.json")
    )
    assert str(tmp_path / folder / beside) in said


@pytest.mark.parametrize(
    ("folder", "filename", "fields"),
    [
        ("plain", "config.json", {}),  # no mark
        ("plain", "qwen3-8b.config.json", {"_name_or_path": "org/Qwen3-8B"}),
        ("plain", "qwen3-8bfp8x.config.json", {}),  # inside a word: no mark
        ("Qwen-awqward", "config.json", {}),
        # a quantization config in the file: read, nothing to say
        (
            "Qwen3-8B-FP8",
            "config.json",
            {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}},
        ),
    ],
)
def test_no_warning_without_a_mark_or_with_a_config(tmp_path, folder, filename, fields):
    m = _load(_qwen(tmp_path / folder, filename, **fields))
    assert unread_quantization_warning(m) == ""


def test_shipped_models_say_nothing():
    for name in ("deepseek-v3", "qwen3-8b", "gpt-oss-120b", "nemotron-3-super-120b-a12b"):
        assert unread_quantization_warning(load_model(name)) == ""


def test_the_library_warns_on_load(tmp_path):
    path = _qwen(tmp_path / "Qwen3-8B-AWQ", "config.json")
    with pytest.warns(MlacalcWarning, match="says AWQ"):
        load_model(str(path))


def test_a_file_not_named_config_json_is_told_how_to_name_it(tmp_path):
    """``nemo-fp8.json``: the loader reads nothing beside a file not named ``*config.json``;
    the warning said ``ne.hf_quant_config.json`` (the name cut by len("config.json"))."""
    path = _qwen(tmp_path / "plain", "nemo-fp8.json")
    said = unread_quantization_warning(_load(path))
    assert "says FP8 " in said and "ne.hf_quant_config.json" not in said
    assert f"rename it {tmp_path / 'plain' / 'nemo-fp8.config.json'}" in said
    assert str(tmp_path / "plain" / "nemo-fp8.hf_quant_config.json") in said
    # the loader reads the file the warning names, under the name it gives
    renamed = _qwen(tmp_path / "plain", "nemo-fp8.config.json")
    shutil.copy(
        REF / "hf-configs-2" / f"{SUPER}.hf_quant_config.json",
        tmp_path / "plain" / "nemo-fp8.hf_quant_config.json",
    )
    assert _load(renamed).quantization is not None


def test_a_given_weight_dtype_silences_the_warning(tmp_path):
    """``--weight-dtype fp8`` sizes the table fp8: the warning said 'weights sized bf16 ...
    or give --weight-dtype' all the same."""
    path = _qwen(tmp_path / "Qwen3-8B-FP8", "config.json")
    assert unread_quantization_warning(_load(path), "fp8") == ""
    for dtype in ("fp8", "bf16"):
        out = CliRunner().invoke(cli, ["report", str(path), "--weight-dtype", dtype])
        assert out.exit_code == 0, out.output
        assert "its name says FP8" not in out.output
    out = CliRunner().invoke(cli, ["report", str(path)])
    assert out.output.count("its name says FP8") == 1
