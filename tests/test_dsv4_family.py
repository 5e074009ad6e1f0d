"""DeepSeek-V4 as a loadable family (``deepseek_v4``: :mod:`mlacalc.models.hf.dsv4`, the layer
kinds ``csa`` / ``hca`` / ``swa`` of :mod:`mlacalc.cost.compressed`).

Parameters equal the reference built on the meta device and the exact figure of
:mod:`mlacalc.models.deepseek_v4`; the cache equals the reference's tensors where the two
conventions agree (fewer than ``W`` tokens) and the module's engine convention everywhere; the
attention FLOPs and the step's kernels equal the module's counts (checked there against
``FlopCounterMode``); serving's cache grows by one pooled key per ratio tokens; bad values of
the new fields are refused in one line naming the field.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

import mlacalc
from mlacalc.cost import compressed as cc
from mlacalc.cost.engine import attention_cost, kv_cache
from mlacalc.cost.model_step import step_kernels
from mlacalc.models import deepseek_v4 as v4
from mlacalc.models.architecture import layer_pattern
from mlacalc.models.hf import import_hf_config
from mlacalc.models.registry import model_types
from mlacalc.report import model_report
from mlacalc.words.errors import ConfigError
from mlacalc.words.kernels import variant_of

PRO_JSON = (
    Path(__file__).parent / "data" / "hf-configs-2" / "deepseek-ai--DeepSeek-V4-Pro.config.json"
)
PRO_TOTAL = 1_572_999_528_803


def _raw() -> dict:
    return json.loads(PRO_JSON.read_text(encoding="utf-8"))


def _first(raw: dict, layers: int) -> dict:
    out = {**raw, "num_hidden_layers": layers}
    for key in ("compress_ratios", "layer_types", "mlp_layer_types"):
        if isinstance(out.get(key), list):
            out[key] = out[key][:layers]
    return out


def _reference():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    return pytest.importorskip("hf_reference_2")


TINY = dict(
    model_type="deepseek_v4",
    vocab_size=100,
    hidden_size=64,
    moe_intermediate_size=16,
    num_hidden_layers=4,
    num_attention_heads=4,
    head_dim=32,
    q_lora_rank=16,
    num_experts_per_tok=2,
    n_routed_experts=4,
    hc_mult=2,
    sliding_window=8,
    o_groups=2,
    o_lora_rank=8,
    index_n_heads=2,
    index_head_dim=8,
    index_topk=3,
    layer_types=[v4.SLIDING, v4.CSA, v4.HCA, v4.CSA],
    compress_rates={v4.CSA: 4, v4.HCA: 16},
    mlp_layer_types=["moe", "hash_moe", "moe", "moe"],
)


@pytest.fixture(scope="module")
def pro():
    return mlacalc.load_model("deepseek-v4-pro")


def test_shipped_pro_equals_its_config_json(pro):
    """The shipped YAML and the published config.json read the same model: 61 layers, 31 hca
    and 30 csa, the exact parameters of the reference's checkpoint."""
    from_json = import_hf_config(_raw())
    skip = ("name", "source", "display_name", "notes", "aliases")
    assert {k: v for k, v in pro.to_dict().items() if k not in skip} == {
        k: v for k, v in from_json.to_dict().items() if k not in skip
    }
    assert layer_pattern(pro).describe() == "61 layers: 31 hca + 30 csa; FFN: 61 MoE"
    counts = mlacalc.param_counts(pro)
    c = v4.read_config(_raw())
    assert counts.total == PRO_TOTAL == v4.param_count(c)
    assert counts.active == v4.active_param_count(c, embedding=False) == 48_854_729_059
    assert counts.breakdown["hyper_connections"] == 61 * 2 * (24 * 4 * 7168 + 24 + 3) + (
        4 * 4 * 7168 + 4 + 1
    )
    tid2eid = 3 * 129280 * 6  # the hash layers' token-id tables, counted with the router
    assert counts.breakdown["moe_router"] == 61 * 384 * 7168 + 58 * 384 + tid2eid
    first = [s for n, s in v4.tensors(c) if n.startswith("model.layers.0.self_attn.")]
    assert counts.attention_per_layer == sum(math.prod(s) for s in first)


@pytest.mark.parametrize("name", ["tiny", "pro, 3 layers"])
def test_parameters_equal_reference_on_meta(name):
    ref = _reference()
    data = dict(TINY) if name == "tiny" else _first(_raw(), 3)
    m = import_hf_config(data)
    assert mlacalc.param_counts(m).total == ref.param_count(ref.build(data))


@pytest.mark.parametrize("seq_len", [1, 5, 100])
def test_cache_equals_reference_below_the_window(seq_len):
    """Below ``W`` tokens the engine's ring and the reference's cache hold the same rows: the
    whole cache equals the reference's tensors (HCA and CSA layers, pending windows)."""
    ref = _reference()
    data = _first(_raw(), 3)
    got = sum(b for _, b in ref.cache_bytes(ref.build(data), seq_len))
    assert kv_cache(import_hf_config(data), seq_len).total_bytes == got


@pytest.mark.parametrize("seq_len", [1, 5, 131, 4096, 32768, 1_048_576])
def test_cache_equals_module_engine_convention(pro, seq_len):
    c = v4.config_of(pro)
    parts = cc.cache_bytes(c, seq_len, convention="engine")
    cache = kv_cache(pro, seq_len, batch=3)
    assert cache.total_bytes == 3 * sum(sum(p.values()) for p in parts)
    by = {label: b for label, _, _, b in cache.by_kind}
    hca = [sum(p.values()) for p, t in zip(parts, c.layer_types) if t == v4.HCA]
    assert by["hca"] == 3 * sum(hca)
    assert kv_cache(pro, seq_len, kv_dtype="fp8").total_bytes == cache.total_bytes // 6


def test_cache_grows_by_a_pooled_key_per_ratio_tokens(pro):
    """One token adds 2 D / 128 bytes to an HCA layer and 2 (D + d_i) / 4 to a CSA layer (bf16):
    31 x 8 + 30 x 320 = 9,848 bytes; serving's per-token and per-sequence figures agree."""
    from mlacalc.serving.layout import (
        kv_bytes_per_sequence_per_gpu,
        kv_bytes_per_token_per_gpu,
        make_layout,
    )
    from mlacalc.words.dtypes import resolve_kv_layout

    a, b = (kv_cache(pro, s).total_bytes for s in (32768, 32768 + 128))
    assert b - a == 128 * (31 * 8 + 30 * 320) == 128 * 9848  # a period of both ratios
    # the next token alone: the compressors' pending rows (kv and gate, CSA two series each)
    assert kv_cache(pro, 32768).bytes_per_token == 31 * 2 * 512 * 2 + 30 * 4 * 640 * 2
    bf16 = resolve_kv_layout("bf16")
    lay = make_layout(pro, 8, tp=8)
    assert kv_bytes_per_token_per_gpu(pro, bf16, lay) == 9848  # one K = V head: whole per rank
    a, b = (kv_bytes_per_sequence_per_gpu(pro, bf16, lay, s) for s in (1 << 15, 1 << 16))
    assert b - a == 9848 * (1 << 15)
    assert a == kv_cache(pro, 1 << 15).total_bytes


@pytest.mark.parametrize(
    ("phase", "seq_len", "q_len"),
    [("decode", 32768, 1), ("prefill", 4096, 4096), ("chunk", 9000, 512)],
)
def test_attention_flops_equal_module(pro, phase, seq_len, q_len):
    """Every layer's projections, compressors, indexer and the causal core (the keys a kernel
    that skips masked ones attends), batch 2."""
    c = v4.config_of(pro)
    q = 1 if phase == "decode" else q_len
    want = 0
    for t in c.layer_types:
        stages = cc.attention_flops(c, t, q, seq_len - q)
        want += sum(v for k, v in stages.items() if k != "core")
    cost = attention_cost(pro, phase, seq_len, batch=2, q_len=q_len if phase == "chunk" else None)
    assert cost.flops == 2 * want
    assert cost.group_labels == ("hca", "csa")


def test_step_kernels_equal_module_forward(pro):
    """A decode step's kernels (matmul FLOPs; the hyper-connection kernels, streaming kernels
    that hold the reference's mixer products and the n d multiply-adds of each mix into or out
    of the streams) equal the module's forward of one token with the causal core."""
    c = v4.config_of(pro)
    S, n, d, L = 32768, pro.hc_mult, pro.hidden_size, pro.num_hidden_layers
    ks = step_kernels(pro, "decode", S)
    got = sum(k.flops * k.calls for k in ks if k.kind != "elementwise")
    got += sum(k.flops * k.calls for k in ks if k.name in ("mhc_pre", "mhc_post"))
    parts = cc.forward_flops(c, 1, S - 1)
    eager = sum(cc.attention_flops(c, t, 1, S - 1)["core"] for t in c.layer_types)
    causal = sum(cc.attention_flops(c, t, 1, S - 1)["core_causal"] for t in c.layer_types)
    mixes = 2 * L * 2 * (2 * n * d)  # two sites a layer, into and out of the streams
    assert got == sum(parts.values()) - eager + causal + mixes
    variants = {k.name: variant_of(k.kind, k.shape) for k in ks if k.name.startswith("mhc")}
    assert variants == {"mhc_pre": "mhc_pre", "mhc_post": "mhc_post"}  # their fitted classes


def test_time_plan_and_search_run(pro):
    """predict_time, plan and search take the model; the decode core reads the keys it attends
    (a window and the pooled keys), not the whole context."""
    p = mlacalc.predict_time(pro, "h200", "decode", 131072, batch=8, scope="model")
    assert p.seconds > 0
    plan = mlacalc.plan(pro, "h200", gpus=16, seq_len=131072)
    assert plan.fits and plan.kv_bytes_per_token_per_gpu == 9848
    core = [k for k in plan.kernels if k["name"] == "attention"]
    assert len(core) == 2  # hca and csa
    for k in core:  # 1,152 keys a query at most (128 + 1024): far below the context's bytes
        assert k["bytes_per_call"] < plan.decode_batch * 1152 * 512 * 2 * 1.5
    best = mlacalc.search(pro, "h200", gpus=(16,), isl=4096, osl=1024, modes=("aggregated",))
    assert best is not None


def test_report_is_the_same_warm(pro):
    # its speed warm is benchmarks/bench_report_warm.py's (a timing assert failed under load)
    cold = model_report(pro)
    doc = model_report(mlacalc.load_model("deepseek-v4-pro"))
    assert doc == cold and doc["parameters"]["total"] == PRO_TOTAL


# -------------------------------------------------------------------------- bad input

BAD_YAML = {
    "compress_ratios": ([128, 4], "compress_ratios"),  # not one per layer
    "compress_ratios ": ([128, 4, 64, 4] + [4] * 57, "compress_ratios"),  # not a rate
    "compress_ratios  ": ("128", "compress_ratios"),
    "compress_rate_hca": (4, "compress_rate_hca"),  # equals the CSA rate
    "index_topk": (None, "index_topk"),  # CSA layers need their indexer
    "hash_moe_layers": ([1, 99], "hash_moe_layers"),
    "o_groups": (3, "o_groups"),
    "num_key_value_heads": (2, "num_key_value_heads"),
    "hc_mult": (0, "hc_mult"),
    "o_lora_rank": (None, "o_lora_rank"),
}


@pytest.mark.parametrize("key", list(BAD_YAML))
def test_bad_field_refused_in_one_line(pro, key):
    value, field = BAD_YAML[key]
    data = pro.to_dict()
    data[key.strip()] = value
    with pytest.raises(ConfigError) as info:
        mlacalc.model_from_dict(data)
    message = str(info.value)
    assert field in message and "\n" not in message.strip()


def test_v4_fields_refused_on_another_family():
    data = mlacalc.load_model("llama-3-8b").to_dict()
    data["hc_mult"] = 4
    with pytest.raises(ConfigError, match="hc_mult"):
        mlacalc.model_from_dict(data)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("compress_ratios", [0, 4, 64]),
        ("layer_types", ["full_attention"] * 61),
        ("compress_rates", {v4.CSA: 0}),
        ("num_hash_layers", -1),
        ("index_topk", "many"),
    ],
)
def test_bad_config_json_refused_naming_the_field(key, value):
    data = {**_raw(), key: value}
    if key == "compress_rates":
        data.pop("compress_ratios")
    with pytest.raises(ConfigError) as info:
        import_hf_config(data)
    assert key in str(info.value)


def test_mutations_never_give_a_silent_number(pro):
    """Random edits of the new fields: every one either loads to a model whose counts follow
    (parameters positive, cache and FLOPs computed) or is refused naming a field."""
    import random

    rng = random.Random(4)
    base = pro.to_dict()
    keys = ("compress_ratios", "compress_rate_csa", "compress_rate_hca", "hash_moe_layers",
            "o_groups", "hc_mult", "index_topk", "sliding_window")  # fmt: skip
    for _ in range(40):
        data = dict(base)
        key = rng.choice(keys)
        data[key] = rng.choice([0, 1, 2, 4, 128, -1, None, [1], [0] * 61, [4] * 61, "x", 3.5])
        try:
            m = mlacalc.model_from_dict(data)
        except ConfigError as error:
            assert error.field in (*keys, "compress_ratios") or key in str(error)
            continue
        assert mlacalc.param_counts(m).total > 0
        assert kv_cache(m, 1000).total_bytes > 0
        assert attention_cost(m, "decode", 1000).flops > 0


@pytest.mark.parametrize("kind", ["hca", "csa"])
def test_decode_layer_time_near_the_measured_b200_modules(kind):
    """A sample of sglang 0.5.14's B200 module rows (DeepSeek-V4-Pro, one GPU, fp8 cache): the
    predicted layer time within 0.8x to 1.4x of the measured one at the median (nothing fitted
    on these rows; benchmarks/bench_dsv4_modules.py runs every row)."""
    pytest.importorskip("pyarrow")
    import statistics
    import sys

    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    from bench_dsv4_modules import ratios

    got = ratios(kind, "decode", 24)
    assert 0.8 < statistics.median(got) < 1.4


def test_report_and_list_give_the_mean_growth(pro, run):
    """The report's and the list's "per token" for these layers: the growth averaged over the
    ratios' period (9,848 bytes), not the next token's pending rows."""
    from mlacalc.report import kv_rows

    assert kv_rows(pro, 131072, 1, "bf16")[0]["bytes_per_token"] == 9848
    out, _ = run("list", "--format", "json")
    rows = json.loads(out)
    rows = next(v for v in rows.values() if isinstance(v, list)) if isinstance(rows, dict) else rows
    row = next(r for r in rows if r["name"] == "deepseek-v4-pro")
    assert row["kv_bytes_per_token_bf16"] == 9848 and row["total_params"] == PRO_TOTAL
    report, _ = run("report", "deepseek-v4-pro", "--seq-len", "32k")
    assert "61 layers: 31 hca + 30 csa" in report


@pytest.mark.parametrize(
    "call",
    [
        lambda m: mlacalc.sweep(m, "kv_cache_bytes", seq_len=[1024, 2048]),
        lambda m: mlacalc.training_cost(m, seq_len=4096),
        lambda m: __import__("mlacalc.models.variants").models.variants.as_variant(m, "mla"),
    ],
)
def test_surfaces_without_these_layers_refuse_by_name(pro, call):
    """sweep, training and the variant equivalents do not model these layers: each refuses in
    one line naming the model, never a figure of a look-alike."""
    with pytest.raises(mlacalc.MlacalcError) as info:
        call(pro)
    assert "\n" not in str(info.value).strip()


def test_serving_step_templates_equal_the_model_step(pro):
    """The serving step's kernels (read off the model step at a few tiny steps) equal the model
    step's at real sizes: the attention cores and the indexer over the window and the pooled
    keys, decode and prompts after a full window (a prompt from the start within 1.5%)."""
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.serving.gpu_step import StepModel
    from mlacalc.serving.layout import make_layout
    from mlacalc.words.dtypes import resolve_kv_layout

    model = StepModel(
        pro, make_layout(pro, 1, tp=1), None, resolve_kv_layout("bf16"), load_hardware("h200")
    )

    def flops(kernels, name):
        return [k.flops * k.calls for k in kernels if k.name == name]

    cases = [
        ("decode", dict(dec_B=8, dec_S=32768), 0.0),
        ("chunk", dict(pf_N=1, pf_q=2048, pf_pre=30000), 0.0),
    ]
    cases.append(("prefill", dict(pf_N=1, pf_q=131072, pf_pre=0), 0.015))
    for phase, kw, tol in cases:
        got = model.kernels(**kw)
        if phase == "decode":
            want = step_kernels(pro, "decode", kw["dec_S"], kw["dec_B"])
        else:
            S = kw["pf_q"] + kw["pf_pre"]
            want = step_kernels(
                pro, phase, S, 1, q_len=kw["pf_q"] if kw["pf_pre"] else None, causal=True
            )
        for name in ("attention", "indexer_scores", "q_b_proj"):
            for a, b in zip(flops(got, name), flops(want, name), strict=True):
                assert abs(a - b) <= tol * b, (phase, name, a, b)


def test_a_rank_runs_its_share_of_the_sparse_cores_heads_padded_to_64(pro):
    """FlashMLA's sparse core takes a rank's query heads 64 at a time (cost.compressed.HEAD_TILE):
    DeepSeek-V4-Pro's 128 heads at TP2 are 64 a rank, at TP4 and TP8 32 and 16, each run as 64,
    so a rank's core does the same work from TP2 on (half of TP1's), not 1/8 of it at TP8."""
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.serving.gpu_step import StepModel
    from mlacalc.serving.layout import make_layout
    from mlacalc.words.dtypes import resolve_kv_layout

    def core(tp):
        model = StepModel(
            pro, make_layout(pro, tp, tp=tp), None, resolve_kv_layout("bf16"), load_hardware("h200")
        )
        ks = [k for k in model.kernels(dec_B=8, dec_S=32768) if k.name == "attention"]
        return [(k.flops * k.calls, k.shape["n_heads"]) for k in ks]

    one, two = core(1), core(2)
    assert [h for _, h in one] == [128, 128] and [h for _, h in two] == [64, 64]
    assert [f for f, _ in two] == [f / 2 for f, _ in one]
    assert core(4) == two and core(8) == two


def test_checkpoint_keeps_the_token_id_tables_as_int64(pro):
    """The fp8 checkpoint's kept tensors in bf16, but the hash layers' tid2eid tables as the
    int64 buffers the reference saves (8 bytes a value), named as the router's."""
    from mlacalc.cost.quant import checkpoint_weights

    ck = checkpoint_weights(pro)
    tables = 3 * 129280 * 6
    assert ck.kept_bytes == 2 * ck.kept_params + 6 * tables
    assert "router" in ck.kept_parts and "hyper-connections" in ck.kept_parts
    assert "dense MLP" not in ck.kept_parts


def test_one_gpu_holds_every_parameter(pro):
    """At one GPU the plan's weight parts add up to the parameters, the hyper-connection mixers
    included (a part of their own); at TP 8 those are whole on every rank."""
    from mlacalc.serving.layout import make_layout, weight_breakdown

    parts = weight_breakdown(pro, make_layout(pro, 1))
    assert round(sum(parts.values())) == PRO_TOTAL
    eight = weight_breakdown(pro, make_layout(pro, 8, tp=8))
    assert eight["hyper_connections"] == parts["hyper_connections"]


def test_app_kv_view_shows_the_kinds():
    """The app's KV cache view: the layer pattern, each kind's rows (its window and pooled keys)
    and, where the variant equivalents are refused, the refusal as a note, not an error."""
    pytest.importorskip("streamlit")
    from test_app import run  # deferred: the app's own test helper (Streamlit is optional)

    at = run(model="deepseek-v4-pro")
    assert any("31 hca + 30 csa" in m.value for m in at.markdown)
    kinds = at.dataframe[0].value
    assert kinds["keeps"].str.startswith("its window and pooled keys").all()
    assert any("no MHA/GQA/MQA/MLA equivalent" in i.value for i in at.info)


def test_window_only_layers_and_listed_types():
    """A config of every kind (swa, csa, hca: TINY's listed layer_types, rates 4 and 16, a hash
    layer in the middle): the pattern, the cache by the module's engine convention and the
    attention FLOPs by the module's rules, kind by kind."""
    m = import_hf_config(dict(TINY))
    c = v4.config_of(m)
    assert layer_pattern(m).describe() == "4 layers: 1 swa(8) + 2 csa + 1 hca; FFN: 4 MoE"
    assert m.hash_moe_layers == (2,) and m.compress_ratios == (0, 4, 16, 4)
    for S in (3, 8, 9, 40, 1000):
        want = sum(sum(p.values()) for p in cc.cache_bytes(c, S, convention="engine"))
        assert kv_cache(m, S).total_bytes == want
        cost = attention_cost(m, "decode", S)
        flops = sum(
            v
            for t in c.layer_types
            for k, v in cc.attention_flops(c, t, 1, S - 1).items()
            if k != "core"
        )
        assert cost.flops == flops
    assert mlacalc.param_counts(m).total == v4.param_count(c)


def test_drafts_on_its_unmodelled_mtp_module_are_refused_by_name():
    """Its config states one MTP module, which the reference does not build: plan refuses
    drafts on it naming mtp_tokens and why, rather than 'no MTP module' or a free speed-up."""
    with pytest.raises(mlacalc.MlacalcError) as err:
        mlacalc.plan("deepseek-v4-pro", "B200", 8, seq_len=4096, batch=8, mtp_tokens=1)
    text = str(err.value)
    assert "mtp_tokens" in text and "MTP module is not modelled" in text and "\n" not in text
    with_mtp = mlacalc.plan("deepseek-v4-pro", "B200", 8, seq_len=4096, batch=8, include_mtp=True)
    assert any("MTP module is not modelled" in w for w in with_mtp.warnings)


def test_fp4_experts_bytes_equal_the_fp8_integrations_modules(pro):
    """expert_dtype fp4 (config.json's top level, moved into quantization_config as
    DeepseekV4Config does): each layer's routed experts are stored as transformers' fp8
    integration allocates them (e2m1 pairs in int8, a ue8m0 scale per 32 along the row), the
    rest in fp8 with 128x128 blocks; the shipped YAML and the config.json agree."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import DeepseekV4Config
    from transformers.integrations.finegrained_fp8 import FP8Experts

    from mlacalc.cost.quant import quantized_weight_bytes
    from mlacalc.models.tensors import tensors

    scheme = pro.quantization
    assert scheme.expert_format == "mxfp4" and "mxfp4 experts" in scheme.describe()
    assert import_hf_config(_raw()).quantization == scheme
    ours = quantized_weight_bytes(
        [t for t in tensors(pro) if t.role == "experts" and ".layers.0." in t.name], scheme
    )
    config = DeepseekV4Config(**{k: v for k, v in _raw().items() if k != "quantization_config"})
    with torch.device("meta"):
        module = FP8Experts(config, block_size=(128, 128), scale_fmt="ue8m0", expert_dtype="fp4")
    held = dict(module.named_parameters())
    payload = sum(held[k].numel() * held[k].element_size() for k in ("gate_up_proj", "down_proj"))
    scales = sum(v.numel() * v.element_size() for k, v in held.items() if k.endswith("scale_inv"))
    assert (ours.payload_bytes, ours.scale_bytes) == (payload, scales)


@pytest.mark.parametrize("value", ["fp2", 4, None])
def test_a_bad_expert_dtype_is_refused_naming_the_field(value):
    raw = {**_raw(), "expert_dtype": value}
    if value is None:  # null: the class default, fp8 experts
        assert import_hf_config(raw).quantization.expert_format is None
        return
    with pytest.raises(ConfigError) as err:
        import_hf_config(raw)
    assert "expert_dtype" in str(err.value) and "\n" not in str(err.value)


def test_fp4_experts_are_timed_as_the_expert_dtype_flag_times_them(pro):
    """The checkpoint's fp4 experts run the MXFP4 x MXFP8 MoE (on Blackwell's fp4 tensor
    cores, the weight-only MXFP4 MoE before it), as ``--expert-dtype mxfp4_mxfp8`` runs them:
    the same step (every engine's B200 table times V4's expert shapes in that format)."""
    moe = [k for k in step_kernels(pro, "decode", 4096, 8) if k.kind == "moe"]
    assert [k.dtype for k in moe] == ["w4a8_mxfp4"]
    for hw in ("B200", "H200"):
        read = mlacalc.plan(pro, hw, 8, seq_len=4096, batch=64)
        flag = mlacalc.plan(
            pro, hw, 8, seq_len=4096, batch=64, component_dtypes={"experts": "mxfp4_mxfp8"}
        )
        assert read.weights_per_gpu_bytes == flag.weights_per_gpu_bytes
        assert read.decode_step_s == pytest.approx(flag.decode_step_s, rel=1e-9)
        assert read.decode_step_s > 0


def test_layer_kinds_from_the_class_rule_are_said():
    """Without layer_types and compress_ratios the class's default placement is used, and the
    load says so (the published file lists its 31 hca and 30 csa layers)."""
    listed = import_hf_config(_raw()).derived
    assert any("read from compress_ratios" in d and "(31 hca, 30 csa" in d for d in listed)
    raw = {k: v for k, v in _raw().items() if k not in ("compress_ratios", "layer_types")}
    said = import_hf_config(raw).derived
    assert any("neither layer_types nor compress_ratios given" in d for d in said)


@pytest.mark.parametrize(
    ("key", "value"),
    [("index_topk", 0), ("o_groups", 7), ("compress_ratios", [7] * 62), ("num_hash_layers", -1)],
)
def test_a_bad_field_is_the_only_field_named(key, value):
    """The refusal names the bad field once, not also fields missing or inconsistent only
    because the translation stopped at it (intermediate_size, compress_ratios' length)."""
    with pytest.raises(ConfigError) as err:
        import_hf_config({**_raw(), key: value})
    text = str(err.value)
    assert text.count("field '") == 1 and f"field '{key}'" in text


def test_every_quantized_gemm_of_the_checkpoint_runs_block_scaled(pro):
    """Every GEMM whose weights the checkpoint stores in fp8 blocks runs the block-scaled
    class with its scales (kv_proj, the compressors, the indexer's projections and the grouped
    output projection had kept the per-tensor class); the indexer's weights_proj, kept in bf16
    by the checkpoint, runs in bf16."""
    gemms = {(k.name, k.calls): k for k in step_kernels(pro, "decode", 4096, 8) if k.kind == "gemm"}
    classes = {name: k.dtype for (name, _), k in gemms.items()}
    for name in ("kv_proj", "compressor", "o_a_proj", "o_b_proj", "indexer_q_proj"):
        assert classes[name] == "fp8_block", name
    assert classes["indexer_weights_proj"] == "bf16"


def test_a_served_prompts_indexer_scores_take_the_model_steps_geometry(pro):
    """A served prompt's indexer scores are DeepGEMM's MQA logits as the model step lays them
    out (cost.compressed): a (query, head) row a unit, the mean pooled keys a query of the
    chunk sees, no causal mask of their own; not the core's geometry the served step gives
    other attention kernels."""
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.serving.gpu_step import StepModel
    from mlacalc.serving.layout import make_layout
    from mlacalc.words.dtypes import resolve_kv_layout

    model = StepModel(
        pro, make_layout(pro, 1, tp=1), None, resolve_kv_layout("bf16"), load_hardware("h200")
    )
    for q, pre in ((2048, 30000), (4096, 0)):
        (got,) = [
            k for k in model.kernels(pf_N=1, pf_q=q, pf_pre=pre) if k.name == "indexer_scores"
        ]
        phase = "chunk" if pre else "prefill"
        want = [k for k in step_kernels(pro, phase, q + pre, 1, q_len=q if pre else None,
                                        causal=True) if k.name == "indexer_scores"]  # fmt: skip
        assert (
            (got.kind, got.dtype) == (want[0].kind, want[0].dtype) == ("attention_prefill", "fp8")
        )
        for field in ("q_len", "n_heads", "causal"):
            assert got.shape[field] == want[0].shape[field]
        assert abs(got.shape["kv_len"] - want[0].shape["kv_len"]) <= 1


def test_no_doc_calls_a_loadable_family_unloadable():
    """docs/api.md and docs/conventions.md said DeepSeek-V4 was not loadable (the registry
    refusing ``deepseek_v4``) after it became a family that loads and ships."""
    claim = re.compile(r"([\w.-]+) configs are not (?:yet )?loadable|registry refuses `(\w+)`")
    shipped = mlacalc.shipped_models()
    for doc in sorted((Path(__file__).parents[1] / "docs").glob("*.md")):
        for m in claim.finditer(doc.read_text()):
            name, model_type = m.groups()
            assert model_type not in model_types(), f"{doc.name}: {m.group(0)}"
            if name:
                loads = [s for s in shipped if s.startswith(name.lower())]
                assert not loads, f"{doc.name}: {m.group(0)}, but {loads} load"
