"""Model families with layers of different kinds: patterns, published counts, chunked and
sliding attention costs, refusals, quantized bytes and load speed.

Exactness against the Hugging Face implementations (parameters and cache bytes) is in
``tests/test_reference_hf.py``; these tests need neither torch nor transformers except
the FlopCounterMode check, which importorskips torch.
"""

from __future__ import annotations

import pytest
from reference_data import HF_CONFIGS

import mlacalc
from mlacalc.cost.attention import chunked_keys_and_pairs
from mlacalc.cost.quant import Tensor, quantization_scheme, quantized_weight_bytes
from mlacalc.models.architecture import layer_pattern
from mlacalc.models.tensors import tensors
from mlacalc.words.errors import ConfigError

CONFIGS = HF_CONFIGS
NEW = (
    "qwen3-8b",
    "qwen3-30b-a3b",
    "glm-4.7",
    "minimax-m2.5",
    "phi-3.5-mini",
    "gpt-oss-120b",
    "gemma-3-1b",
    "llama-4-scout",
)

PATTERNS = {
    "qwen3-8b": "36 layers: 36 full; FFN: 36 dense",
    "qwen3-30b-a3b": "48 layers: 48 full; FFN: 48 MoE",
    "glm-4.7": "92 layers: 92 full; FFN: 3 dense + 89 MoE",
    "minimax-m2.5": "62 layers: 62 full; FFN: 62 MoE",
    "phi-3.5-mini": "32 layers: 32 sliding(262144); FFN: 32 dense",
    "gpt-oss-120b": "36 layers: 18 sliding(128) + 18 full; FFN: 36 MoE",
    "gemma-3-1b": "26 layers: 22 sliding(512) + 4 full; FFN: 26 dense",
    "llama-4-scout": "48 layers: 36 chunked(8192) + 12 full no-rope; FFN: 48 MoE",
}


@pytest.mark.parametrize("name", NEW)
def test_shipped_pattern(name):
    assert layer_pattern(mlacalc.load_model(name)).describe() == PATTERNS[name]


# model card figures (SOURCES.md): (total, active, last digit's unit). A card figure agrees
# when it is the count rounded or truncated to that unit. Active as the card counts it: with
# the input embedding (Qwen) or without it (OpenAI, MiniMax count the matmul weights).
CARDS = {
    "qwen3-8b": (8.2e9, 1e8, None, None),
    "qwen3-30b-a3b": (30.5e9, 1e8, 3.3e9, 1e8),
    "minimax-m2.5": (230e9, 1e10, 10e9, 1e9),
    "phi-3.5-mini": (3.8e9, 1e8, None, None),
    "gpt-oss-120b": (117e9, 1e9, 5.1e9, 1e8),
    "gemma-3-1b": (1e9, 1e9, None, None),
    "kimi-k2.5": (1e12, 1e12, 32e9, 1e9),
    "qwen1.5-moe-a2.7b": (14.3e9, 1e8, 2.7e9, 1e8),
    "ministral-3-3b": (3.4e9, 1e8, None, None),
    "internlm2-7b": (7.7e9, 1e8, None, None),
    str(CONFIGS / "glm-5.config.json"): (744e9, 1e9, 40e9, 1e9),
    str(CONFIGS / "glm-4.7-flash.config.json"): (30e9, 1e9, 3e9, 1e9),
    str(CONFIGS / "qwen3-next-80b-a3b-thinking.config.json"): (80e9, 1e10, 3e9, 1e9),
}


def _agrees(count: int, card: float, unit: float) -> bool:
    return abs(count - card) <= unit / 2 or 0 <= count - card < unit


def _round(x: float, digits: int) -> float:
    return float(f"{x:.{digits}g}")


@pytest.mark.parametrize("name", sorted(CARDS))
def test_published_counts_within_rounding(name):
    total, total_unit, active, active_unit = CARDS[name]
    p = mlacalc.param_counts(name)
    assert _agrees(p.total, total, total_unit)
    if active is not None:
        with_embedding = p.active + p.embedding
        assert _agrees(p.active, active, active_unit) or _agrees(
            with_embedding, active, active_unit
        )


def test_deepseek_v32_card_counts_the_mtp_copies():
    """DeepSeek-V3.2's 685B is the main model (671.9B with the indexers), its MTP layer, and
    the MTP module's own copies of the embedding and output head that the checkpoint
    stores (Hugging Face shares them); 37B active."""
    m = mlacalc.load_model(CONFIGS / "deepseek-v3.2.config.json")
    p = mlacalc.param_counts(m)
    assert _agrees(p.total + p.mtp + 2 * m.vocab_size * m.hidden_size, 685e9, 1e9)
    assert _agrees(p.active, 37e9, 1e9)


def test_published_counts_explained():
    """Llama 4 Scout's 109B includes the vision encoder: the language model is 107.8B and
    its 17B active counts the embedding. GLM-4.7's 355B lies between the main model
    (352.8B) and the main model with its MTP layer (356.8B) of this abridged config;
    its 32B active is the transformer blocks without embedding and output head."""
    scout = mlacalc.param_counts("llama-4-scout")
    assert _round(scout.total, 4) == 107.8e9 and _round(scout.active + scout.embedding, 2) == 17e9
    glm = mlacalc.param_counts("glm-4.7")
    assert glm.total < 355e9 < glm.total + glm.mtp
    assert _round(glm.active - glm.breakdown["lm_head"], 2) == 32e9


@pytest.mark.parametrize("name", NEW)
def test_tensors_sum_to_the_total(name):
    m = mlacalc.load_model(name)
    assert sum(t.numel for t in tensors(m)) == mlacalc.param_counts(m).total


def _brute(q: int, s: int, c: int, causal: bool) -> tuple[int, int]:
    """Pairs by enumeration: per touched chunk, a dense block (non-causal) or each query's
    own keys (causal)."""
    new = range(s - q + 1, s + 1)
    pairs = 0
    for chunk in {(j - 1) // c for j in new}:
        queries = [j for j in new if (j - 1) // c == chunk]
        last = max(queries)
        if causal:
            pairs += sum(j - chunk * c for j in queries)
        else:
            pairs += len(queries) * (last - chunk * c)
    keys = len({k for j in new for k in range((j - 1) // c * c + 1, j + 1)})
    return keys, pairs


@pytest.mark.parametrize("causal", [False, True])
def test_chunked_pairs_match_enumeration(causal):
    for c in (1, 3, 8):
        for s in range(1, 30):
            for q in range(1, s + 1):
                assert chunked_keys_and_pairs(q, s, c, causal) == _brute(q, s, c, causal)


@pytest.mark.parametrize("phase", ["prefill", "decode", "chunk"])
def test_layered_cost_is_the_sum_of_its_kinds(phase):
    """GPT-OSS and Llama 4: the whole-model cost is the full layers' plus the others'."""
    for name in ("gpt-oss-120b", "llama-4-scout", "gemma-3-1b"):
        m = mlacalc.load_model(name)
        q_len = 512 if phase == "chunk" else None
        cost = mlacalc.attention_cost(m, phase, 20000, 2, q_len=q_len, causal=True)
        parts = []
        for kind, n in layer_pattern(m).groups().items():
            sub = m.with_changes(
                num_hidden_layers=n,
                full_attention_interval=None,
                sliding_window=kind.window if kind.attention == "sliding" else None,
                attention_chunk_size=kind.window if kind.attention == "chunked" else None,
            )
            parts.append(mlacalc.attention_cost(sub, phase, 20000, 2, q_len=q_len, causal=True))
        assert cost.flops == sum(p.flops for p in parts)
        assert cost.fused_bytes == sum(p.fused_bytes for p in parts)
        assert cost.layers == m.num_hidden_layers
        assert mlacalc.attention_flops(m, phase, 20000, 2, q_len=q_len, causal=True) == cost.flops


def test_layered_kv_cache_by_kind():
    m = mlacalc.load_model("gpt-oss-120b")
    kv = mlacalc.kv_cache(m, 4096, batch=3)
    row = 2 * 8 * 64 * 2
    assert kv.by_kind == (
        ("sliding(128)", 18, 128, 18 * 3 * 128 * row),
        ("full", 18, 4096, 18 * 3 * 4096 * row),
    )
    assert kv.total_bytes == mlacalc.kv_cache_bytes(m, 4096, 3) == sum(b for *_, b in kv.by_kind)
    assert kv.to_dict()["by_kind"][0]["tokens_per_layer"] == 128
    scout = mlacalc.kv_cache(mlacalc.load_model("llama-4-scout"), 100_000)
    assert [(k, n, t) for k, n, t, _ in scout.by_kind] == [
        ("chunked(8192)", 36, 8192),
        ("full no-rope", 12, 100_000),
    ]


def test_chunked_core_flops_match_flop_counter():
    """A chunked layer's attention core, run chunk by chunk in PyTorch, counts the FLOPs
    FlopCounterMode sees (tiny dimensions, prefill of 20 tokens in chunks of 8)."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    m = mlacalc.load_model("llama-4-scout").with_changes(
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        num_hidden_layers=4,
        attention_chunk_size=8,
        n_routed_experts=2,
        num_experts_per_tok=1,
        moe_intermediate_size=32,
        intermediate_size=64,
        vocab_size=100,
    )
    s, c, h, dh = 20, 8, 4, 16
    q, k, v = (torch.randn(1, h, s, dh) for _ in range(3))
    with FlopCounterMode(display=False) as counter:
        for start in range(0, s, c):
            qc, kc, vc = (
                q[:, :, start : start + c],
                k[:, :, start : start + c],
                v[:, :, start : start + c],
            )
            torch.matmul(torch.softmax(torch.matmul(qc, kc.transpose(-1, -2)), -1), vc)
    cost = mlacalc.attention_cost(m, "prefill", s)
    chunked = cost.groups[[lab.startswith("chunked") for lab in cost.group_labels].index(True)]
    assert chunked.stage_flops["core"] == 3 * counter.get_total_flops()


def test_refused_by_name():
    """A config.json the product cannot model is refused with the field and a way out."""
    import json

    data = json.loads((CONFIGS / "qwen3-30b-a3b.config.json").read_text())
    with pytest.raises(ConfigError, match="decoder_sparse_step"):
        mlacalc.models.loading.import_hf_config({**data, "decoder_sparse_step": 2})
    oss = json.loads((CONFIGS / "gpt-oss-120b.config.json").read_text())
    types = oss["layer_types"][:]
    types[0] = "full_attention"
    with pytest.raises(ConfigError, match="layer_types"):
        mlacalc.models.loading.import_hf_config({**oss, "layer_types": types})
    with pytest.raises(ConfigError, match="linear_attention"):
        mlacalc.models.loading.import_hf_config({**oss, "layer_types": ["linear_attention"] * 36})
    glm = json.loads((CONFIGS / "glm-4.7-fp8.config.json").read_text())
    with pytest.raises(ConfigError, match="use_qk_norm"):
        mlacalc.models.loading.import_hf_config({**glm, "use_qk_norm": True})
    kimi = json.loads((CONFIGS / "kimi-linear-48b-a3b.config.json").read_text())
    with pytest.raises(ConfigError, match="layer_types"):
        mlacalc.models.loading.import_hf_config({**kimi, "layer_types": ["conv"] * 27})


def test_linear_attention_state_does_not_grow():
    """Qwen3-Next: 36 linear layers keep a fixed state, 12 full layers every token."""
    m = mlacalc.load_model(CONFIGS / "qwen3-next-80b-a3b-thinking.config.json")
    assert layer_pattern(m).describe() == "48 layers: 36 linear + 12 full; FFN: 48 MoE"
    state = (2 * 16 * 128 + 32 * 128) * 4 * 2 + 32 * 128 * 128 * 4
    row = 2 * 2 * 256 * 2
    for s in (1, 4096, 1 << 20):
        kv = mlacalc.kv_cache(m, s, batch=2)
        assert kv.total_bytes == 2 * (36 * state + 12 * s * row)
        assert dict((k, b) for k, _, _, b in kv.by_kind)["linear"] == 2 * 36 * state


def test_quantized_bytes_by_scheme():
    """fp8 block scales, MXFP4 experts and packed int4 groups, on hand-sized tensors."""
    ts = [
        Tensor("model.embed_tokens.weight", (1000, 256)),
        Tensor("model.layers.0.self_attn.q_proj.weight", (300, 256), "linear"),
        Tensor("model.layers.0.mlp.experts.gate_proj", (4, 128, 256), "experts"),
        Tensor("model.layers.0.mlp.gate.weight", (4, 256)),
        Tensor("lm_head.weight", (1000, 256), "linear"),
    ]
    fp8 = quantization_scheme(
        {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    )
    w = quantized_weight_bytes(ts, fp8)
    assert w.payload_bytes == 300 * 256 + 4 * 128 * 256
    assert w.scale_bytes == 4 * (3 * 2) + 4 * 4 * (1 * 2)  # ceil(300/128) x ceil(256/128)
    assert w.kept_params == 2 * 1000 * 256 + 4 * 256 and "lm_head.weight" in w.kept
    mx = quantization_scheme(
        {"quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]}}
    )
    w = quantized_weight_bytes(ts, mx)
    assert w.payload_bytes == 4 * 128 * 256 // 2 and w.scale_bytes == 4 * 128 * 256 // 32
    int4 = quantization_scheme(
        {
            "quantization_config": {
                "quant_method": "compressed-tensors",
                "format": "pack-quantized",
                "ignore": ["lm_head", "re:.*self_attn.*"],
                "config_groups": {
                    "g": {
                        "targets": ["Linear"],
                        "weights": {
                            "type": "int",
                            "strategy": "group",
                            "num_bits": 4,
                            "group_size": 32,
                            "symmetric": True,
                        },
                    }
                },
            }
        }
    )
    w = quantized_weight_bytes(ts, int4)
    assert w.quantized_params == 4 * 128 * 256
    assert w.payload_bytes == 4 * 128 * 256 // 2
    assert w.scale_bytes == 4 * 128 * (256 // 32) * 2 + 4 * 8
    assert w.total_bytes == w.payload_bytes + w.scale_bytes + w.kept_bytes
    nvfp4 = quantization_scheme({"_name_or_path": "nvidia/DeepSeek-V3.1-NVFP4"})
    assert nvfp4.method == "external" and "hf_quant_config.json" in nvfp4.note
    with pytest.raises(ConfigError, match=r"hf_quant_config\.json"):
        quantized_weight_bytes(ts, nvfp4)
    with pytest.raises(ConfigError, match="quant_method"):
        quantization_scheme({"quantization_config": {"quant_method": "hqq"}})


def test_gpt_oss_checkpoint_bytes():
    """GPT-OSS-120b as released: MXFP4 experts, everything else bf16."""
    import json

    data = json.loads((CONFIGS / "gpt-oss-120b.config.json").read_text())
    m = mlacalc.load_model("gpt-oss-120b")
    w = quantized_weight_bytes(tensors(m), quantization_scheme(data))
    experts = 36 * 128 * 3 * 2880 * 2880
    assert w.quantized_params == experts
    assert w.payload_bytes == experts // 2 and w.scale_bytes == experts // 32
    assert w.kept_params == mlacalc.param_counts(m).total - experts
    assert "model.layers.*.self_attn.q_proj.weight" in w.kept


@pytest.mark.parametrize(
    "name", (*NEW, "gemma-4-26b-a4b", "qwen3-next-80b-a3b", "kimi-linear-48b-a3b")
)
def test_load_and_report(name):
    """A shipped model loads and its whole report computes: parameters, the cache at 128K x 8,
    prefill, decode and chunk costs, the layer pattern (benchmarks/bench_engine.py times it)."""
    m = mlacalc.load_model(name)
    assert mlacalc.param_counts(m).total > 0
    assert mlacalc.kv_cache(m, 131072, 8).total_bytes > 0
    for phase in ("prefill", "decode"):
        assert mlacalc.attention_cost(m, phase, 131072, 8).flops > 0
    assert mlacalc.attention_cost(m, "chunk", 131072, 8, q_len=2048, causal=True).flops > 0
    assert layer_pattern(m).describe()


@pytest.mark.parametrize(
    ("model", "alibi", "rope"),
    [("gpt2", False, False), ("falcon-7b", False, True), ("falcon-7b", True, False)],
)
def test_rope_is_the_families_and_alibi_has_none(model, alibi, rope):
    """RoPE from the family (GPT-2's learned positions: none) and a Falcon's ``alibi`` (none);
    a layer without it rotates nothing: by hand, RoPE of one decode token reads and writes its
    query and key heads (bf16), 0 without it; the eager reference dispatches its rope-free
    op count (tests/test_timemodel_predict.py recounts LAUNCHES)."""
    from mlacalc.cost.attention import model_dims
    from mlacalc.timemodel.predict import LAUNCHES, predict_time

    m = mlacalc.load_model(model)
    if alibi:
        m = m.with_changes(alibi=True)
    assert (m.alibi, m.rope) == (alibi, rope)
    assert model_dims(m)["rho"] == int(rope)
    ops = {o.name: o for o in mlacalc.attention_cost(m, "decode", 64, 1).ops}
    width = (m.num_attention_heads + m.num_key_value_heads) * m.head_dim
    assert ops["rope"].bytes == (2 * 2 * width if rope else 0)
    lat = 7e-6
    p = predict_time(m, "H100-SXM", "decode", 64, 1, mode="unfused", launch_latency_s=lat)
    assert p.seconds >= LAUNCHES[("mha", rope, True)] * lat * 0.999
    if not rope:  # the host's dispatch of the rope-free forward bounds an unfused step
        assert p.seconds < LAUNCHES[("mha", True, True)] * lat


def test_alibi_is_falcons_only():
    with pytest.raises(ConfigError) as info:
        mlacalc.load_model("llama-3-8b").with_changes(alibi=True)
    assert info.value.field == "alibi" and "Falcon" in str(info.value)


def test_a_falcon_config_json_with_alibi_has_no_rope():
    import json
    from pathlib import Path

    raw = json.loads((Path(__file__).parent / "data" / "hf" / "falcon-7b.config.json").read_text())
    m = mlacalc.import_hf_config({**raw, "alibi": True})
    assert m.alibi and not m.rope
