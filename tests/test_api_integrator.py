"""What a library integrator's trial found (mlacalc embedded in a planning service): the
library's answers are the CLI's, JSON-ready, and its refusals name the argument. Each test
failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import mlacalc

LLAMA = Path(__file__).parent / "data" / "hf-configs" / "llama-3.1-8b.config.json"


# ---- 1. search(...).to_dict() is `mlacalc search --format json`
def test_search_to_dict_is_the_cli_json_on_a_checkpoint_model(run):
    """Was: gpt-oss-120b's points sized as its checkpoint stores them ("checkpoint mxfp4
    experts") said weight_dtype bf16 in Python and fp4 on the CLI (plan says fp4), and the
    Python dict had no plan_command."""
    r = mlacalc.search("gpt-oss-120b", "H100-SXM", (1, 2), isl=2000, osl=500)
    lib = r.to_dict()
    out, _ = run(
        "search", "gpt-oss-120b", "-H", "H100-SXM", "--gpus", "1,2", "--isl", 2000,
        "--osl", 500, "--format", "json",
    )  # fmt: skip
    cli = json.loads(out)
    lib.pop("seconds"), cli.pop("seconds")
    assert lib == cli
    stored = [p for p in lib["frontier"] if p["weight_format"].startswith("checkpoint ")]
    assert stored and {p["weight_dtype"] for p in stored} == {"fp4"}
    assert lib["plan_command"].startswith("mlacalc plan gpt-oss-120b -H H100-SXM ")
    assert r.plan_command == lib["plan_command"]


# ---- 2. numpy integers in, Python ints out: every result goes through json.dumps
def test_numpy_integer_arguments_come_back_as_python_ints_in_json():
    """Was: plan(..., np.int64(2)) kept gpus and total_gpus as np.int64, predict_time its
    seq_len and batch, search its isl and osl, model_report its settings and attention rows:
    json.dumps of each raised TypeError."""
    import numpy as np

    from mlacalc.report import model_report

    n = np.int64
    m = mlacalc.load_model("llama-3.1-8b")
    p = mlacalc.plan(m, "H100-SXM", n(2), isl=2000, osl=500, concurrency=32)
    assert type(p.gpus) is int and type(p.total_gpus) is int
    t = mlacalc.predict_time(m, "H100-SXM", "decode", n(8192), batch=n(8))
    assert type(t.seq_len) is int and type(t.batch) is int
    s = mlacalc.search(m, "H100-SXM", (1,), isl=n(2000), osl=n(500), batches=(n(8),))
    assert type(s.isl) is int and type(s.osl) is int
    r = model_report(m, seq_len=n(8192), batch=n(2))
    for doc in (p.to_dict(), t.to_dict(), s.to_dict(), r):
        json.dumps(doc, allow_nan=False)


# ---- 3. the report's kv_cache rows say which one a server holds
def test_report_kv_rows_flag_the_row_kv_cache_bytes_gives():
    """Was: no flag, and row 0 of an MLA model is the naive one (DeepSeek-V3: 4,997,120 B a
    token against the 70,272 served; a Llama converted at rank 512: 655,360 vs 36,864)."""
    from mlacalc.report import model_report

    converted = mlacalc.convert("llama-3.1-8b", kv_lora_rank=512).model
    for m, served in (("deepseek-v3", 70_272), (converted, 36_864), ("llama-3.1-8b", 131_072)):
        rows = model_report(m, seq_len=8192, batch=1)["kv_cache"]
        (default,) = [r for r in rows if r["default"]]
        assert default["bytes_per_token"] == served
        assert default["total_bytes"] == mlacalc.kv_cache_bytes(m, 8192, 1)
    assert rows[0]["default"] is True  # one row (GQA): it


def test_report_text_marks_the_served_kv_row(run):
    out, _ = run("report", "deepseek-v3", "--seq-len", 8192)
    assert "absorbed (default)" in out and "naive (default)" not in out


# ---- 4. parse_upload takes the text too, and refuses anything else naming the argument
def test_parse_upload_takes_text_and_refuses_other_types_in_one_line():
    """Was: parse_upload(json_text_str, "config.json") raised AttributeError (str.decode)."""
    import pytest

    from mlacalc.models.loading import parse_upload
    from mlacalc.words.errors import InvalidArgumentError

    text = LLAMA.read_text()
    as_text = parse_upload(text, "config.json")
    assert as_text == parse_upload(text.encode(), "config.json")
    for bad, word in ((None, "binary mode"), (json.loads(text), "import_hf_config")):
        with pytest.raises(InvalidArgumentError) as e:
            parse_upload(bad, "config.json")
        assert e.value.argument == "raw" and word in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(InvalidArgumentError, match=r"^quant: "):
        parse_upload(text, "config.json", quant=3)


def test_parse_upload_refuses_a_file_name_that_is_not_text_naming_it():
    """Was: parse_upload(text, None) and parse_upload(text, 5) raised AttributeError
    ('endswith'); a path is taken as its text."""
    import pytest

    from mlacalc.models.loading import parse_upload
    from mlacalc.words.errors import InvalidArgumentError

    text = LLAMA.read_text()
    for bad in (None, 5):
        with pytest.raises(InvalidArgumentError) as e:
            parse_upload(text, bad)
        assert e.value.argument == "filename" and "config.json" in str(e.value)
        assert "\n" not in str(e.value)
    with pytest.raises(InvalidArgumentError, match=r"^quant_filename: "):
        parse_upload(text, "config.json", quant=b"{}", quant_filename=None)
    assert parse_upload(text, Path("config.json")) == parse_upload(text, "config.json")


# ---- 5. an unknown dtype names the argument that carried it, everywhere
def test_unknown_dtypes_name_their_argument_in_plan_and_report():
    """Was: plan(kv_dtype="int3") / plan(weight_dtype="int3") and model_report(kv_dtype=...)
    raised UnknownDtypeError with argument None and a message naming no field, where
    kv_cache_bytes says "kv_dtype: ..."."""
    import pytest

    from mlacalc.report import compare_rows, model_report
    from mlacalc.words.errors import UnknownDtypeError

    calls = {
        "kv_dtype": [
            lambda: mlacalc.plan("llama-3.1-8b", "H100-SXM", 1, seq_len=8192, kv_dtype="int3"),
            lambda: model_report("llama-3.1-8b", kv_dtype="int3"),
            lambda: compare_rows(["llama-3.1-8b"], seq_len=8192, batch=1, kv_dtype="int3"),
            lambda: mlacalc.kv_cache_bytes("llama-3.1-8b", 8192, kv_dtype="int3"),
        ],
        "weight_dtype": [
            lambda: mlacalc.plan("llama-3.1-8b", "H100-SXM", 1, seq_len=8192, weight_dtype="int3"),
        ],
    }
    for name, fns in calls.items():
        for fn in fns:
            with pytest.raises(UnknownDtypeError) as e:
                fn()
            assert e.value.argument == name and str(e.value).startswith(f"{name}: unknown")


# ---- 6. values no model can have: one line naming the field and the fix (or a warning)
def _llama(**changes):
    data = json.loads(LLAMA.read_text())
    data.update(changes)
    return data


def test_config_values_no_model_has_are_refused_naming_the_field():
    """Was: each accepted silently (INT2 read as no KV quantization)."""
    import pytest

    from mlacalc.words.errors import ConfigError

    base = json.loads(LLAMA.read_text())
    cases = {
        "rms_norm_eps": _llama(rms_norm_eps=float("nan")),
        "rope_scaling.factor": _llama(
            rope_scaling={**base["rope_scaling"], "factor": float("nan")}
        ),
        # 0 had read as 1 (`factor or 1.0`): a review
        "rope_scaling.factor ": _llama(rope_scaling={**base["rope_scaling"], "factor": 0}),
        "rope_scaling": _llama(rope_scaling="yes"),
        "max_position_embeddings": _llama(max_position_embeddings=10**12),
    }
    for field, data in cases.items():
        with pytest.raises(ConfigError) as e:
            mlacalc.import_hf_config(data)
        assert e.value.field == field.strip() and e.value.fix and "\n" not in str(e.value), field
    # no factor stated, or null: not refused
    for absent in ({"rope_type": "default"}, {"rope_type": "default", "factor": None}):
        mlacalc.import_hf_config(_llama(rope_scaling=absent))


def test_modelopt_kv_algo_and_group_size_are_checked():
    import pytest

    from mlacalc.models.loading import parse_upload
    from mlacalc.words.errors import ConfigError

    folder = Path(__file__).parent / "data" / "hf-configs-2"
    config = (folder / "nvidia--DeepSeek-V3.1-NVFP4.config.json").read_bytes()
    quant = json.loads((folder / "nvidia--DeepSeek-V3.1-NVFP4.hf_quant_config.json").read_text())
    layers = {"m.mlp": {"quant_algo": "NVFP4"}}
    mixed = {"quant_algo": "MIXED_PRECISION", "quantized_layers": layers}
    for change, field in (
        ({"kv_cache_quant_algo": "INT2"}, "quantization.kv_cache_quant_algo"),
        ({"group_size": 0}, "quantization.group_size"),
        ({"group_size": -16}, "quantization.group_size"),
        ({**mixed, "group_size": 0}, "quantization.group_size"),
    ):
        q = json.loads(json.dumps(quant))
        q["quantization"].update(change)
        with pytest.raises(ConfigError) as e:
            parse_upload(config, "config.json", quant=json.dumps(q).encode())
        assert e.value.field == field and e.value.fix, change
    # INT8 is ModelOpt's too (from recall): refused as not modelled, not as not ModelOpt's
    q = json.loads(json.dumps(quant))
    q["quantization"]["kv_cache_quant_algo"] = "INT8"
    with pytest.raises(ConfigError, match=r"'INT8' is not modelled \(FP8, NVFP4 or null\)"):
        parse_upload(config, "config.json", quant=json.dumps(q).encode())


def test_floored_head_dim_is_warned_and_its_note_says_floored():
    """24 heads over hidden 4,096: head_dim 170 as transformers floors it, the query width
    4,080; was silent, its note saying "hidden_size / num_attention_heads"."""
    import warnings

    from mlacalc.words.errors import MlacalcWarning

    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        m = mlacalc.import_hf_config(_llama(num_attention_heads=24))
    assert m.head_dim == 170
    assert any("floored: 4,096 / 24" in str(n) for n in m.derived)
    (w,) = [w for w in said if issubclass(w.category, MlacalcWarning)]
    assert "4,080" in str(w.message) and "state head_dim" in str(w.message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MlacalcWarning)
        mlacalc.import_hf_config(_llama(head_dim=256))  # stated: as meant, silent


# ---- 8. messages with a fix
def test_empty_json_and_qwen2_sliding_windows_say_what_to_do():
    import pytest

    from mlacalc.models.loading import parse_upload
    from mlacalc.words.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        parse_upload(b"", "config.json")
    assert "is empty" in str(e.value) and e.value.fix
    data = _llama(model_type="qwen2", use_sliding_window=True, sliding_window=4096)
    with pytest.raises(ConfigError) as e:
        mlacalc.import_hf_config(data)
    assert e.value.field == "use_sliding_window" and "use_sliding_window: false" in e.value.fix


# ---- 7. the library's conversion notes carry the quality caveat the CLI gives
def test_conversion_notes_say_the_counts_are_before_fine_tuning(run):
    from mlacalc.models.convert import BEFORE_FINE_TUNING

    c = mlacalc.convert("llama-3.1-8b", kv_lora_rank=512)
    assert c.notes[-1] == BEFORE_FINE_TUNING and "fine-tuning" in BEFORE_FINE_TUNING
    out, _ = run("convert", "llama-3.1-8b", "--kv-lora-rank", 512)
    assert out.count("counts before any fine-tuning") == 1  # said once in the text


# ---- 9. api.md's routes of the commands run as written
def test_api_md_command_routes_block_runs():
    """The block api.md gives for report / compare / --save / list --hardware / --insight."""
    doc = (Path(__file__).parent.parent / "docs" / "api.md").read_text()
    block = doc.split("## The commands' own routes")[1].split("```python\n")[1].split("```")[0]
    names = {"mlacalc": mlacalc}
    exec(compile(block, "api.md", "exec"), names)
    for name in ("model_report", "compare_rows", "model_yaml", "shipped_hardware", "ridge_point"):
        assert callable(names[name])
