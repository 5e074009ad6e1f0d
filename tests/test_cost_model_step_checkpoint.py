"""The step's kernels read a quantized checkpoint's weights as it stores them.

Without a chosen weight dtype, each GEMM and MoE kernel of
:func:`mlacalc.cost.model_step.step_kernels`
reads the checkpoint bytes of the tensors it multiplies by (values and scales; tensors the
checkpoint keeps in bf16 at two bytes) and names the kernel class of that storage. The
weight bytes of a kernel are read here without the checkpoint route: two runs with chosen
weight dtypes (bf16: activations + 2 P, fp32: activations + 4 P) give its activation bytes
``2 bf16 - fp32``, so the weights it reads are its bytes less those. (The pair was bf16 and
fp8 until a dtype asked with fewer bits than the checkpoint stores the head in left the head
as stored, one rule on every route: fp8 no longer moves the head's bytes, fp32 does.) They
are checked against :mod:`mlacalc.cost.quant` over the checkpoint's tensors and against hand
counts.
"""

import pytest

from mlacalc import predict_time
from mlacalc.cost.engine import as_model
from mlacalc.cost.model_step import as_stored, checkpoint_stored, step_kernels, stored_experts
from mlacalc.cost.quant import checkpoint_weights, tensor_bytes
from mlacalc.models.tensors import tensors

#: Tensors the step does not read as weights: the embedding table (the lookup reads the
#: tokens' rows, counted as activations), GPT-OSS's expert and router biases and attention
#: sinks, MiniMax's query/key norms (not in the step's kernels), and the DSA indexer's key
#: norm (read in bf16 whatever the weight dtype, so the two-run route counts it with the
#: activations).
_NOT_READ = (
    "embed_tokens",
    "gate_up_proj_bias",
    "down_proj_bias",
    "mlp.gate.bias",
    "sinks",
    "q_norm",
    "k_norm",
)


def _weight_bytes(model, *args, **kwargs):
    """(kernel, weight bytes per call) of the checkpoint route, activations taken out by the
    two chosen-dtype runs."""
    stored = step_kernels(model, *args, **kwargs)
    b16 = step_kernels(model, *args, weight_dtype="bf16", **kwargs)
    f32 = step_kernels(model, *args, weight_dtype="fp32", **kwargs)
    out = []
    for s, x, y in zip(stored, b16, f32, strict=True):
        assert s.name == x.name and s.flops == x.flops and s.shape == x.shape  # FLOPs logical
        out.append((s, s.bytes - (2 * x.bytes - y.bytes)))
    return out


def _checkpoint_read(name: str) -> int:
    """Checkpoint bytes of the main model's tensors the step reads as weights (quant route)."""
    m = as_model(name)
    return sum(
        sum(tensor_bytes(t, m.quantization))
        for t in tensors(m)
        if not any(n in t.name for n in _NOT_READ)
    )


@pytest.mark.parametrize(
    ("name", "batch", "read"),
    [
        # every expert touched at batch 512: the whole checkpoint less the embedding table
        ("deepseek-v3", 512, 673_150_582_112 - 129_280 * 7168 * 2),
        ("kimi-k2.5", 512, 594_205_858_816 - 163_840 * 7168 * 2),
        # less the embedding table and 36 layers of expert biases, router bias and sinks
        ("gpt-oss-120b", 512, 65_248_815_744 - 201_088 * 2880 * 2 - 36 * 2 * (128 * 8640 + 192)),
    ],
)
def test_decode_reads_the_checkpoint_bytes(name, batch, read):
    """A decode step touching every expert reads each weight tensor once, as stored."""
    pairs = _weight_bytes(name, "decode", 4096, batch)
    experts = next(k for k, _ in pairs if k.name == "routed_experts")
    assert experts.shape["active_experts"] == as_model(name).n_routed_experts
    total = sum(w * k.calls for k, w in pairs)
    assert total == _checkpoint_read(name) == read
    assert checkpoint_weights(as_model(name)).total_bytes > read


@pytest.mark.parametrize("name", ["deepseek-v3.2", "minimax-m2.5", "kimi-k2"])
def test_other_quantized_checkpoints_read_as_stored(name):
    """The other shipped quantized checkpoints (the DSA indexer's fp8 projections, MiniMax's
    GQA attention in fp8 blocks): every expert touched, the checkpoint's bytes less the
    tensors the step does not read, against mlacalc.cost.quant."""
    pairs = _weight_bytes(name, "decode", 4096, 2048)
    experts = next(k for k, _ in pairs if k.name == "routed_experts")
    assert experts.shape["active_experts"] == as_model(name).n_routed_experts
    assert sum(w * k.calls for k, w in pairs) == _checkpoint_read(name)


def test_small_batch_reads_the_active_experts_as_stored():
    """At batch 1 the routed experts read ``top-k`` experts' stored bytes, by hand.

    DeepSeek-V3: 3 x 7168 x 2048 fp8 values and 3 x 16 x 56 float32 block scales; GPT-OSS:
    gate_up [5760, 2880] and down [2880, 2880] at half a byte, one byte per 32; Kimi-K2.5:
    int4 packed 8 to an int32 word, one bf16 scale per 32 and an 8-byte shape pair per matrix.
    """
    per_expert = {
        "deepseek-v3": 3 * 7168 * 2048 + 3 * 4 * 16 * 56,  # 44,050,944
        "gpt-oss-120b": (5760 + 2880) * 2880 // 2 + (5760 + 2880) * 90,  # 13,219,200
        "kimi-k2.5": 3 * (2048 * 7168 // 2 + 2048 * 7168 // 32 * 2 + 8),  # 24,772,632
    }
    dtype = {"deepseek-v3": "fp8_block", "gpt-oss-120b": "w4a16_mxfp4", "kimi-k2.5": "w4a16"}
    for name, one in per_expert.items():
        m = as_model(name)
        pairs = dict((k.name, (k, w)) for k, w in _weight_bytes(name, "decode", 4096, 1))
        k, w = pairs["routed_experts"]
        assert k.shape["active_experts"] == m.num_experts_per_tok
        assert w == m.num_experts_per_tok * one
        assert k.dtype == dtype[name]
    assert per_expert["deepseek-v3"] == 44_050_944  # docs/model-families.md's EP8 figure


def test_kernel_classes_follow_the_storage():
    """fp8 blocks time as ``fp8_block``; tensors kept in bf16 (router, head, GPT-OSS and
    Kimi attention, Kimi's dense and shared experts) as the bf16 class; norms keep theirs."""
    ds = {k.name: k for k in step_kernels("deepseek-v3", "decode", 4096, 8)}
    for name in ("qkv_a_proj", "q_b_proj", "q_absorb", "o_absorb", "o_proj"):
        assert ds[name].dtype == "fp8_block"
    assert ds["shared_experts_up"].dtype == ds["dense_ffn_down"].dtype == "fp8_block"
    assert ds["router"].dtype == ds["lm_head"].dtype == "bf16"
    assert ds["input_norm"].dtype == "bf16"
    kimi = {k.name: k.dtype for k in step_kernels("kimi-k2.5", "decode", 4096, 8)}
    assert {kimi[n] for n in ("q_b_proj", "o_proj", "shared_experts_up", "dense_ffn_up")} == {
        "bf16"
    }
    oss = {k.name: k.dtype for k in step_kernels("gpt-oss-120b", "decode", 4096, 8)}
    assert oss["routed_experts"] == "w4a16_mxfp4" and oss["q_proj"] == oss["lm_head"] == "bf16"


def test_absorbed_products_split_kv_b_proj_exactly():
    """Decode's W_UK and W_UV products read kv_b_proj's key and value rows: 128 heads x
    128 rows x 512 fp8 values and 128 x 4 block scales each, together the whole tensor."""
    pairs = {k.name: w for k, w in _weight_bytes("deepseek-v3", "decode", 4096, 1)}
    part = 128 * 128 * 512 + 128 * 4 * 4
    assert pairs["q_absorb"] == pairs["o_absorb"] == part
    m = as_model("deepseek-v3")
    kv_b = next(t for t in tensors(m) if t.name.endswith("0.self_attn.kv_b_proj.weight"))
    assert sum(tensor_bytes(kv_b, m.quantization)) == 2 * part
    prefill = {k.name: w for k, w in _weight_bytes("deepseek-v3", "prefill", 512, 1)}
    assert prefill["kv_b_proj"] == 2 * part


def test_a_chosen_weight_dtype_overrides_the_checkpoint():
    """A chosen dtype sizes and classes every weight in it but the output head, which it
    leaves as the checkpoint stores it where that has more bits (DeepSeek-V3's bf16 head
    under fp8: cost.quant.kept_head_format, the rule plan had alone; it was fp8 here); a
    model without a quantization_config reads its weights_dtype either way."""
    chosen = {
        k.name: k for k in step_kernels("gpt-oss-120b", "decode", 4096, 1, weight_dtype="bf16")
    }
    assert chosen["routed_experts"].dtype == "bf16"
    assert chosen["routed_experts"].bytes == 4 * 3 * 2880 * 2880 * 2 + 2 * 4 * 2880 * 2
    ds = {k.name: k for k in step_kernels("deepseek-v3", "decode", 4096, 1, weight_dtype="fp8")}
    assert ds["q_absorb"].dtype == "fp8" and ds["lm_head"].dtype == "bf16"
    assert not checkpoint_stored("llama-3-8b") and checkpoint_stored("gpt-oss-120b")
    plain = step_kernels("llama-3-8b", "decode", 4096, 4)
    assert plain == step_kernels("llama-3-8b", "decode", 4096, 4, weight_dtype="bf16")
    assert as_stored(plain, "llama-3-8b") == plain


def test_predict_time_reads_gpt_oss_as_stored_on_h100():
    """GPT-OSS-120B decode on H100: the step moves the checkpoint's bytes, not bf16's.

    At batch 256 every expert is read: the weight bytes are the 64.0 GB the checkpoint
    stores (not 2 bytes a weight), the step moves far fewer bytes and is faster than with
    bf16 chosen (memory-bound). At batch 8 the active experts' 4-bit bytes make it faster too.
    The plain roofline at batch 1 is memory-bound on the stored bytes."""
    for batch in (8, 256):
        stored = predict_time("gpt-oss-120b", "H100", "decode", 4096, batch, scope="model")
        bf16 = predict_time(
            "gpt-oss-120b", "H100", "decode", 4096, batch, scope="model", weight_dtype="bf16"
        )
        kernels = step_kernels("gpt-oss-120b", "decode", 4096, batch)
        assert stored.bytes == sum(k.bytes * k.calls for k in kernels)
        # (the stored MXFP4 experts run the Triton kernel the measured rows time, which
        # reaches 0.44 of the bf16 rate on 16-row tiles: its compute term edges past its
        # weight stream, so only the bf16 step is asserted memory-bound)
        assert bf16.bound == "memory"
        assert stored.memory_s < 0.6 * bf16.memory_s and stored.seconds < 0.6 * bf16.seconds
        moe = next(o for o in stored.ops if o.name == "routed_experts")
        assert "H100" in moe.calibration
    pairs = _weight_bytes("gpt-oss-120b", "decode", 4096, 256)
    assert sum(w * k.calls for k, w in pairs) == 64_010_908_800
    roof = predict_time(
        "gpt-oss-120b", "H100", "decode", 4096, 1, scope="model", profile="roofline"
    )
    roof_bf16 = predict_time(
        "gpt-oss-120b",
        "H100",
        "decode",
        4096,
        1,
        scope="model",
        profile="roofline",
        weight_dtype="bf16",
    )
    assert roof.bound == "memory" and roof.bytes < 0.5 * roof_bf16.bytes


def test_predict_time_other_routes_read_as_stored():
    """The unfused (eager) attention and the attention-layer scope read the checkpoint's
    fp8 blocks too: DeepSeek-V3's projections move fewer bytes than bf16's."""
    for kwargs in ({"mode": "unfused"}, {"scope": "attention_layer"}, {"profile": "roofline"}):
        stored = predict_time("deepseek-v3", "H100", "decode", 4096, 1, **kwargs)
        bf16 = predict_time("deepseek-v3", "H100", "decode", 4096, 1, weight_dtype="bf16", **kwargs)
        q = next(o for o in stored.ops if o.name == "q_b_proj")
        q16 = next(o for o in bf16.ops if o.name == "q_b_proj")
        assert q.flops == q16.flops
        assert q16.bytes - q.bytes == 24576 * 1536 - 192 * 12 * 4  # values 1 byte, + scales


def test_prediction_names_how_weights_are_read():
    """The prediction (and its JSON) says whether the checkpoint's storage was read."""
    stored = predict_time("kimi-k2.5", "H100", "decode", 4096, 1, scope="model")
    assert stored.weights == "checkpoint int4 group 32"
    assert stored.to_dict()["weights"] == stored.weights
    chosen = predict_time("kimi-k2.5", "H100", "decode", 4096, 1, scope="model", weight_dtype="fp8")
    # every weight 1 byte but the head, kept bf16 as stored (kept_head_format; was "fp8"), and
    # the routers and norms, kept bf16 as memory sizes them: 33,362,168,320 B read against the
    # int4 checkpoint's 33,321,082,624 (below it while the routers were read at 1 byte)
    assert chosen.weights == "fp8, head bf16" and chosen.bytes != stored.bytes
    assert predict_time("llama-3-8b", "H100", "decode", 4096).weights == "bf16"


@pytest.mark.parametrize("model", ["deepseek-v3", "gpt-oss-120b", "kimi-k2.5"])
def test_serving_step_reads_the_checkpoint_as_the_model_step(model):
    """StepModel without a weight dtype runs the model step's stored kernels: at one GPU the
    same bytes and classes (the routed experts: the same class and bytes per expert touched,
    the serving step counting touched experts as a fraction)."""
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.serving import StepModel, make_layout
    from mlacalc.words.dtypes import resolve_kv_layout

    m = as_model(model)
    kv = resolve_kv_layout("bf16")
    sm = StepModel(m, make_layout(m, 1), None, kv, load_hardware("H100-SXM"))
    ref = {k.name: k for k in step_kernels(m, "decode", 4096, 16, kv_dtype=kv)}
    ours = {k.name: k for k in sm.kernels(dec_B=16, dec_S=4096)}
    for name, r in ref.items():
        k = ours[name]
        assert (k.kind, k.dtype, k.flops) == (r.kind, r.dtype, r.flops), name
        if k.kind != "moe":
            assert k.bytes == r.bytes, name
    experts, r = ours["routed_experts"], ref["routed_experts"]
    acts = 2 * 16 * m.num_experts_per_tok * m.hidden_size * 2
    per_expert = (r.bytes - acts) / r.shape["active_experts"]
    E, topk = m.n_routed_experts, m.num_experts_per_tok
    touched = E * (1 - (1 - topk / E) ** 16)  # expected experts touched, as a fraction
    assert per_expert == stored_experts(m)[0]
    assert experts.bytes - acts == pytest.approx(touched * per_expert, rel=1e-9, abs=1)


def test_a_modelopt_export_runs_each_kernel_as_its_tensors_are_stored():
    """NVIDIA's DeepSeek-V3.1 NVFP4 export (hf_quant_config.json beside config.json) keeps
    every layer's q_a, q_b, kv_a and kv_b projections in bf16 (``exclude_modules`` names them
    layer by layer) and stores the rest in NVFP4 with quantized activations: those kernels read
    bf16 bytes and run the bf16 class, the others the fp4 class (fp4 GEMMs and MoE), as
    ``--weight-dtype fp4`` times them, not the weight-only one. The exclusions had been asked of
    the names within a layer (``self_attn.q_a_proj``), so every projection read 4-bit bytes as
    ``w4a16``. Qwen3.6-27B's mixed export: its W4A16 NVFP4 MLPs weight-only, its per-tensor fp8
    attention projections the fp8 class."""
    from reference_data import HF_CONFIGS_2

    import mlacalc

    config = HF_CONFIGS_2 / "nvidia--DeepSeek-V3.1-NVFP4.config.json"
    m = mlacalc.load_model(config)
    assert checkpoint_stored(m)
    ks = {k.name: k for k in step_kernels(m, "decode", 4096, 8)}
    kept = ("qkv_a_proj", "q_b_proj", "q_absorb", "o_absorb")
    assert {ks[n].dtype for n in kept} == {"bf16"}
    assert {ks[n].dtype for n in ("o_proj", "shared_experts_up", "routed_experts")} == {"fp4"}
    # the fused q_a + kv_a projection reads its bf16 weights, hidden x (q_lora_rank + the
    # latent row) at two bytes, by hand
    b16 = {k.name: k for k in step_kernels(m, "decode", 4096, 8, weight_dtype="bf16")}
    assert ks["qkv_a_proj"].bytes == b16["qkv_a_proj"].bytes
    width = m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim
    assert b16["qkv_a_proj"].bytes >= m.hidden_size * width * 2
    assert ks["o_proj"].bytes < b16["o_proj"].bytes / 3  # 4.5 bits a weight
    qwen = mlacalc.load_model(HF_CONFIGS_2 / "nvidia--Qwen3.6-27B-NVFP4.config.json")
    qk = {k.name: k.dtype for k in step_kernels(qwen, "decode", 4096, 8)}
    assert qk["dense_ffn_up"] == qk["dense_ffn_down"] == "w4a16"
    assert qk["q_proj"] == qk["q_gate_proj"] == qk["o_proj"] == "fp8"
    # its q_proj tensor holds the query and the output gate: each product reads half of it
    d = qwen.hidden_size
    width = qwen.num_attention_heads * qwen.head_dim
    (q,) = [t for t in tensors(qwen) if t.name == "model.layers.3.self_attn.q_proj.weight"]
    assert q.shape == (2 * width, d)
    qs = {k.name: k for k in step_kernels(qwen, "decode", 4096, 8)}
    b16 = {k.name: k for k in step_kernels(qwen, "decode", 4096, 8, weight_dtype="bf16")}
    for name in ("q_proj", "q_gate_proj"):  # fp8 per tensor: a byte a weight, one scale
        assert qs[name].bytes - (b16[name].bytes - 2 * width * d) == width * d + 4


def test_linear_and_mamba_projections_read_as_stored():
    """The mixers' own projections read the checkpoint's bytes and run its class: Qwen3.6-27B
    NVFP4's linear layers store in_proj_qkv and in_proj_z in fp8 per tensor (a float32 weight
    and input scale each) and keep in_proj_b / in_proj_a in bf16; Nemotron-3.5-Lightning's
    Mamba in_proj in fp8. By hand, one token: weights plus its bf16 input and output rows.
    They had read bf16 bytes as the bf16 class."""
    from reference_data import HF_CONFIGS_2

    import mlacalc

    qwen = mlacalc.load_model(HF_CONFIGS_2 / "nvidia--Qwen3.6-27B-NVFP4.config.json")
    ks = {k.name: k for k in step_kernels(qwen, "decode", 1024, 1)}
    d, qkv, z, ba = 5120, 2 * 16 * 128 + 48 * 128, 48 * 128, 2 * 48
    weights = (qkv * d + 8) + (z * d + 8) + ba * d * 2
    assert ks["linear_in_proj"].dtype == "fp8"
    assert ks["linear_in_proj"].bytes == weights + d * 2 + (qkv + z + ba) * 2
    assert ks["linear_o_proj"].dtype == "fp8"
    assert ks["linear_o_proj"].bytes == (d * z + 8) + z * 2 + d * 2
    light = mlacalc.load_model(
        HF_CONFIGS_2 / "nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4.config.json"
    )
    ks = {k.name: k for k in step_kernels(light, "decode", 1024, 1)}
    d, proj = 2688, 4096 + 6144 + 64
    assert ks["mamba_in_proj"].dtype == "fp8"
    assert ks["mamba_in_proj"].bytes == (proj * d + 8) + d * 2 + proj * 2
