"""The MLA module tables as the kernel lists the engines run (docs/time-model.md, "MLA module
rows"): an expanded prompt puts its keys together in a copy kernel of its own, in every
engine, as a served step does."""

from __future__ import annotations

import numpy as np
import pytest
from reference_data import MEASURED


def _context_module(system: str, engine: str):
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured

    t = next(x for x in load_measured(MEASURED / system / "mla", engine=engine).tables
             if x.table == "mla_context_module_perf" and x.engine == engine)  # fmt: skip
    return t, map_table(t)


@pytest.mark.parametrize("engine", ["trtllm", "vllm"])
@pytest.mark.parametrize("system", ["h100_sxm", "b200_sxm"])
def test_prompt_module_copies_its_keys_together(system, engine):
    """Every expanded prompt module row runs the key assembly, in every engine (TensorRT-LLM's
    ``forward_context_default``, vLLM's ``torch.cat``): 128-wide k_nope read and a 192-wide
    bf16 key written a token and head, the 64-wide RoPE key read once a token. vLLM's rows on
    its decode path (mapping.decode_path_prompts) expand no keys."""
    from mlacalc.measured.mapping import decode_path_prompts

    t, mapped = _context_module(system, engine)
    (part,) = [p for p in mapped.parts if p.name == "k_assemble"]
    expanded = np.flatnonzero(~decode_path_prompts(t))
    assert expanded.size and np.array_equal(np.sort(part.rows), expanded)
    c = t.columns
    tok = (np.asarray(c["batch_size"], float) * np.asarray(c["isl"], float))[part.rows]
    h = np.asarray(c["num_heads"], float)[part.rows]
    assert part.batch.kind == "elementwise" and part.batch.dtype == "bf16"
    np.testing.assert_allclose(part.batch.bytes, tok * h * (128 + 192) * 2 + tok * 64 * 2)
    np.testing.assert_allclose(part.batch.shape["elements"], tok * h * 192)


@pytest.mark.parametrize("gemm_type", ["bf16", "fp8_block"])
def test_served_prompt_runs_the_module_rows_kernels(gemm_type):
    """The served DeepSeek-V3 prompt layer (cost.model_step) and the mapped TensorRT-LLM module
    row of the same shape (128 heads, bf16 cache) run the same key assembly and the same fused
    q_a+kv_a GEMM: name, FLOPs, bytes (one definition: model_step.k_assemble_bytes) and the
    GEMM's n and k. Before, the step had no k_assemble, and its qkv_a_proj carried the naive
    op sequence's expanded K/V cache write (n_h * 320 elements a token, 672 MB at 2 x 4,096
    tokens against the GEMM's own 182 MB), where the engines write each token's latent row in
    their RoPE pre-kernel."""
    from mlacalc.cost.model_step import step_kernels
    from mlacalc.measured.mapped import canon_dtypes

    t, mapped = _context_module("h100_sxm", "trtllm")
    c = t.columns
    gt, kvd = canon_dtypes(c["gemm_type"]), canon_dtypes(c["kv_cache_dtype"])
    pick = (np.asarray(c["num_heads"]) == 128) & (gt == gemm_type) & (kvd == "bf16")
    idx = int(np.flatnonzero(pick & (np.asarray(c["isl"]) == 4096))[0])
    bs, isl = int(c["batch_size"][idx]), int(c["isl"][idx])
    w = "bf16" if gemm_type == "bf16" else "fp8"
    step = step_kernels("deepseek-v3", "prefill", isl, bs, weight_dtype=w, scope="attention_layer")
    step = {k.name: k for k in step}
    for served, name in (("k_assemble", "k_assemble"), ("qkv_a_proj", "q_a+kv_a")):
        (part,) = [p for p in mapped.parts if p.name == name and idx in p.rows]
        at = int(np.flatnonzero(part.rows == idx)[0])
        k, b = step[served], part.batch
        assert k.kind == b.kind and k.flops == pytest.approx(float(b.flops[at]), rel=1e-12)
        for dim in ("n", "k", "elements"):
            if dim in k.shape:
                assert k.shape[dim] == b.shape[dim][at], (served, dim)
        if served == "qkv_a_proj" and gemm_type == "fp8_block":
            # the step's fp8 GEMM reads its bf16 input (quantized in the GEMM's own pass) where
            # the mapping counts the quantized input and the 1x128 scales
            continue
        assert k.bytes == pytest.approx(float(b.bytes[at]), rel=1e-12), served


@pytest.mark.parametrize("table", ["mla_context_module_perf", "mla_generation_module_perf"])
def test_module_gemms_are_resident_only_as_part_of_the_whole_module(table):
    """Every GEMM and BMM of a module row judges its weight's L2 residency against all the
    bytes one replay cycles through the L2 (mapping.module_l2_bytes): the module's weights
    and the cached rows its attention reads, the same for every kernel of the row."""
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured
    from mlacalc.timemodel.shared import elem_bytes

    t = next(x for x in load_measured(MEASURED / "h100_sxm" / "mla", engine="trtllm").tables
             if x.table == table)  # fmt: skip
    c = t.columns
    h = np.asarray(c["num_heads"], float)
    gt = np.asarray(c["gemm_type"]).astype(str)
    e = np.where(gt == "fp8_block", 1.0, 2.0)
    weights = (2112 * 7168 + h * 192 * 1536 + 7168 * h * 128) * e + h * 256 * 512 * 2.0
    kv = np.asarray(c["isl"] if table.startswith("mla_context") else c["step"] + 1, float)
    kvb = np.where(np.asarray(c["kv_cache_dtype"]).astype(str) == "fp8", 1.0, 2.0)
    cache = np.asarray(c["batch_size"], float) * kv * 576 * kvb
    gemms = [p for p in map_table(t).parts if p.batch.kind == "gemm"]
    assert len(gemms) >= 6
    for p in gemms:
        b = p.batch
        weight = b.shape["groups"] * b.shape["n"] * b.shape["k"] * elem_bytes(b.dtype)
        np.testing.assert_allclose(
            weight * b.shape["weight_copies"], (weights + cache)[p.rows], rtol=1e-9
        )


@pytest.mark.parametrize(
    ("system", "hw", "kv", "isl"),
    [("h100_sxm", "H100-SXM", "bf16", 128), ("h100_sxm", "H100-SXM", "fp8", 64),
     ("b200_sxm", "B200", "bf16", 1), ("b200_sxm", "B200", "fp8", 1)],
)  # fmt: skip
def test_served_vllm_short_prompt_runs_the_mapped_decode_path(system, hw, kv, isl):
    """A served vLLM prompt of up to its MLA decode backend's threshold
    (mla_time.step_decode_path_tokens, the rule mapping.decode_path_prompts reads the module
    rows by) runs the mapped module row's kernels: the absorption BMMs and the latent decode
    core of ``isl`` causal queries a sequence, the same FLOPs, shapes and (bf16 cache) bytes
    less the RoPE pre-kernel's, which the step runs as its own ``rope``; no kv_b_proj,
    k_assemble or prompt core. With an fp8 cache the step's core reads its query in bf16
    where the mapped call quantizes it in its pre-kernel and reads fp8: ``isl`` x heads x 576
    bytes a sequence more. Before, the served step ran the expanded prompt at every length."""
    from mlacalc.cost.engine import as_model
    from mlacalc.cost.model_step import step_kernels
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.measured.mapped import canon_dtypes
    from mlacalc.serving import StepModel, make_layout
    from mlacalc.words.dtypes import resolve_kv_layout

    t, mapped = _context_module(system, "vllm")
    c = t.columns
    pick = (np.asarray(c["num_heads"]) == 128) & (canon_dtypes(c["gemm_type"]) == "bf16")
    pick &= (canon_dtypes(c["kv_cache_dtype"]) == kv) & (np.asarray(c["isl"]) == isl)
    idx = int(np.flatnonzero(pick & (np.asarray(c["batch_size"]) == 4))[0])
    row = {p.name: p for p in mapped.parts if idx in p.rows}
    assert "kv_b" not in row and "k_assemble" not in row
    m = as_model("deepseek-v3")
    sm = StepModel(m, make_layout(m, 1), "bf16", resolve_kv_layout(kv), load_hardware(hw), None,
                   engine="vllm")  # fmt: skip
    served = {k.name: k for k in sm.kernels(pf_N=4, pf_q=isl, pf_pre=0)}
    predicted = step_kernels(m, "prefill", isl, 4, impl="absorbed", causal=True,
                             weight_dtype="bf16", kv_dtype=kv, scope="attention_layer")  # fmt: skip
    assert not {"kv_b_proj", "k_assemble"} & set(served)
    for name, mapped_name in (("q_absorb", "bmm_pre"), ("o_absorb", "bmm_post"),
                              ("attention", "mla_decode")):  # fmt: skip
        p = row[mapped_name]
        at = int(np.flatnonzero(p.rows == idx)[0])
        b = p.batch
        one = next(k for k in predicted if k.name == name)
        for k in (served[name], one):
            assert (k.kind, k.dtype) == (b.kind, b.dtype), name
            assert k.flops == pytest.approx(float(b.flops[at]), rel=1e-12), name
            for dim in ("m", "n", "k", "groups", "batch", "q_len", "kv_len", "n_heads",
                        "head_dim_qk", "head_dim_v", "causal"):  # fmt: skip
                if dim in k.shape:
                    assert k.shape[dim] == b.shape[dim][at], (name, dim)
            pre = b.shape["preprocess_bytes"][at] if "preprocess_bytes" in b.shape else 0.0
            own = float(b.bytes[at] - pre)
            if name == "attention" and kv == "fp8":
                own += 4 * isl * 128 * 576
            assert k.bytes == pytest.approx(own, rel=1e-12), name


def test_vllm_decode_path_stops_at_the_threshold():
    """One token over vLLM's threshold (512 with a bf16 cache on H100, 128 fp8, 1 on B200) a
    prompt takes the expanded path again, served and predicted; TensorRT-LLM's never takes the
    decode path; a decode step is absorbed whatever the engine."""
    from mlacalc.cost.engine import as_model
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.serving import StepModel, make_layout
    from mlacalc.timemodel.predict import predict_time
    from mlacalc.words.dtypes import resolve_kv_layout

    m = as_model("deepseek-v3")
    for hw, kv, limit in (("H100-SXM", "bf16", 512), ("H100-SXM", "fp8", 128), ("B200", "fp8", 1)):
        for engine in ("vllm", "trtllm"):
            sm = StepModel(m, make_layout(m, 8, tp=8), "fp8", resolve_kv_layout(kv),
                           load_hardware(hw), None, engine=engine)  # fmt: skip
            for q in (limit, limit + 1):
                core = {k.kind for k in sm.kernels(pf_N=2, pf_q=q) if k.name == "attention"}
                latent = engine == "vllm" and q <= limit
                assert core == {"mla_decode" if latent else "mla_prefill"}, (hw, kv, engine, q)
                p = predict_time(m, hw, "prefill", q, 2, kv_dtype=kv, engine=engine, causal=True)
                assert p.impl == ("absorbed" if latent else "naive"), (hw, kv, engine, q)
            assert predict_time(m, hw, "decode", 4096, 2, kv_dtype=kv, engine=engine).impl == (
                "absorbed"
            )


def test_vllm_decode_path_prompts_beside_decoding_sequences():
    """A served vLLM step with decoding sequences and decode-path prompts runs the absorption
    BMMs over both's tokens, and the latent core as two calls (the decoding sequences', the
    prompts' of ``pf_q`` causal queries over their rows); the expanded kernels run nothing."""
    from mlacalc.cost.engine import as_model
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.serving import StepModel, make_layout
    from mlacalc.words.dtypes import resolve_kv_layout

    m = as_model("deepseek-v3")
    sm = StepModel(m, make_layout(m, 1), "bf16", resolve_kv_layout("bf16"),
                   load_hardware("H100-SXM"), None, engine="vllm")  # fmt: skip
    ks = sm.kernels(dec_B=8, dec_S=1000, pf_N=2, pf_q=64, pf_pre=0)
    cores = [k for k in ks if k.name == "attention"]
    assert sorted((k.kind, k.shape["batch"], k.shape["q_len"]) for k in cores) == [
        ("mla_decode", 2, 64), ("mla_decode", 8, 1)
    ]  # fmt: skip
    (q_absorb,) = [k for k in ks if k.name == "q_absorb"]
    assert q_absorb.shape["m"] == 8 + 2 * 64
    assert not {"kv_b_proj", "k_assemble"} & {k.name for k in ks}
    st = sm.step(dec_B=8, dec_S=1000, pf_N=2, pf_q=64, pf_pre=0)
    assert np.isfinite(st.seconds).all() and st.seconds[0] > 0


def test_vllm_block_fp8_projections_take_trtllm_fit():
    """vLLM's block-scaled fp8 projections (module rows, served steps) are timed by a stand-in
    block-scaled GEMM class its profiles hold, not by vLLM's bf16 fit, which its device level
    fell back to (its gemm_perf fp8_block rows fit variants only: docs/time-model.md, "vLLM's
    block-scaled projections take TensorRT-LLM's fit"): on H100 TensorRT-LLM's fit of the
    device; on B200 vLLM's own DeepGEMM variant without its wrapper's host floor, with the
    graphed kernel's floor of TensorRT-LLM's fit ("vLLM's B200 MLA prompt projections take
    vLLM's DeepGEMM rate")."""
    from mlacalc.timemodel.profile import load_profile

    prof, trt = load_profile("fit-h100-sxm-vllm"), load_profile("default")
    assert prof.class_found("H100-SXM", "gemm", "fp8_block") == "gemm:fp8_block"
    h100 = prof.params("H100-SXM", "gemm", "fp8_block")[0]
    assert h100 == trt.params("H100-SXM", "gemm", "fp8_block")[0]
    prof, trt = load_profile("fit-b200-sxm-vllm"), load_profile("fit-b200-sxm")
    assert prof.class_found("B200", "gemm", "fp8_block") == "gemm:fp8_block"
    plain = prof.params("B200", "gemm", "fp8_block")[0]
    own = prof.devices["B200"]["gemm:fp8_block:DeepGemmFp8BlockScaledMMKernel"]
    assert plain["eff_compute"] == own["eff_compute"] and plain["host_s"] == 0.0
    assert plain["fixed_s"] == trt.params("B200", "gemm", "fp8_block")[0]["fixed_s"]


def test_vllm_block_fp8_module_rows_within_bound():
    """vLLM's H100 prompt module rows of fp8_block projections: median |error| 6.4% (signed
    -4.5%) with the bf16 GEMM fit in their place, 4.1% (+2.1%) with TensorRT-LLM's block-scaled
    fit and the prompt class refitted."""
    from mlacalc.measured.observations import predict_mapped

    t, mapped = _context_module("h100_sxm", "vllm")
    err = predict_mapped(mapped, None, "fit-h100-sxm-vllm") / t.seconds - 1.0
    sel = (np.asarray(t.columns["gemm_type"]).astype(str) == "fp8_block") & mapped.modelled
    assert sel.sum() > 1000
    assert np.median(np.abs(err[sel])) < 0.05
    assert abs(np.median(err[sel])) < 0.035


def test_vllm_blackwell_bf16_prompt_reads_its_operands_under_its_products():
    """vLLM's B200 bf16 prompt kernel (FLASH_ATTN rows) issues its shared-memory operand reads
    under its products (mla_time.OPERANDS_UNDER_PRODUCTS): its module rows of 6,144 tokens and
    more read +14% to +34% over with a K/V read a block beside the MMAs (signed median
    +17.6%), +2% to +5% (+2.9%) without, the class refitted; its fp8 prompt
    (TensorRT-LLM-gen's, TRTLLM_RAGGED) and H100's keep the reads. A served step's prompt
    takes the column its engine's kernel runs with."""
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.timemodel.device import device_figures
    from mlacalc.timemodel.kernel_time import engine_batch

    t, mapped = _context_module("b200_sxm", "vllm")
    err = predict_mapped(mapped, None, "fit-b200-sxm-vllm") / t.seconds - 1.0
    src = np.asarray(t.columns["kernel_source"]).astype(str)
    sel = (src == "FLASH_ATTN") & (t.columns["isl"] >= 6144) & mapped.modelled
    assert sel.sum() > 500
    # +2.9% -> +7.8% when the B200 fp8_block projections took vLLM's DeepGEMM rate and the
    # prompt classes were refitted on the module rows' residuals (bound was 0.07): every
    # gemm_type's rows read nearer (docs/time-model.md, "vLLM's B200 MLA prompt projections")
    assert abs(np.median(err[sel])) < 0.085
    under = [
        p.batch.shape.get("operand_under") for p in mapped.parts if p.batch.kind == "mla_prefill"
    ]
    assert any(u is not None and u.any() for u in under)
    # a served step: vLLM's bf16 prompt on B200 only
    from mlacalc.words.kernels import KernelBatch

    one = {
        k: np.array([v])
        for k, v in dict(
            batch=1.0, q_len=4096.0, kv_len=4096.0, n_heads=16.0, step_kernel=1.0
        ).items()
    }
    b = KernelBatch("mla_prefill", "bf16", np.array([1e12]), np.array([1e8]), np.array([1.0]), one)
    for engine, device, dtype, want in (
        ("vllm", "B200", "bf16", True),
        ("vllm", "B200", "fp8", False),
        ("vllm", "H100-SXM", "bf16", False),
        ("trtllm", "B200", "bf16", False),
    ):
        run = engine_batch(
            dataclasses_replace(b, dtype), engine, device_figures(load_hardware(device))
        )
        assert ("operand_under" in run.shape) is want, (engine, device, dtype)


def dataclasses_replace(batch, dtype):
    import dataclasses

    return dataclasses.replace(batch, dtype=dtype)


def test_absorbed_chain_takes_its_saving_on_blackwell_only():
    """The dense MLA decode call between the absorption BMMs (``absorbed_chain``) takes
    mla_time.CHAIN_SAVING_S (4 us) less on B200 than stand-alone, nothing on H100, nothing for
    a sparse variant, and never more than half the call."""
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.timemodel.device import device_figures
    from mlacalc.timemodel.mla_time import chain_saving_s
    from mlacalc.timemodel.terms import default_params, kernel_terms
    from mlacalc.words.kernels import KernelBatch

    def call(fig, chain, variant="", latency=5e-6):
        n = 2
        shape = {"batch": np.full(n, 4.0), "q_len": np.ones(n), "kv_len": np.full(n, 1024.0),
                 "n_heads": np.array([1.0, 16.0]), "n_kv": np.ones(n),
                 "head_dim_qk": np.full(n, 576.0), "head_dim_v": np.full(n, 512.0),
                 "kv_bytes": np.full(n, 2.0), "absorbed_chain": np.full(n, chain)}  # fmt: skip
        b = KernelBatch(kind="mla_decode", dtype="bf16", flops=np.full(n, 1e9),
                        bytes=np.full(n, 5e6), calls=np.ones(n), shape=shape,
                        variant=variant)  # fmt: skip
        prm = dict(default_params("mla_decode"), call_latency_s=latency)
        return kernel_terms(b, fig, prm)["seconds"]

    b200, h100 = (device_figures(load_hardware(n)) for n in ("B200", "H100-SXM"))
    assert chain_saving_s(b200) == pytest.approx(4e-6) and chain_saving_s(h100) == 0.0
    np.testing.assert_allclose(call(b200, 0.0) - call(b200, 1.0), 4e-6, rtol=1e-9)
    np.testing.assert_allclose(call(h100, 0.0), call(h100, 1.0))
    np.testing.assert_allclose(call(b200, 0.0, "sparse"), call(b200, 1.0, "sparse"))
    alone = call(b200, 0.0, latency=0.0)
    assert np.all(call(b200, 1.0, latency=0.0) >= 0.5 * alone - 1e-15)


def test_module_rows_and_the_served_step_run_the_absorbed_chain():
    """The mapping marks every module row's decode call that sits between the BMMs (all the
    generation rows; the prompt rows on vLLM's decode path), the stand-alone decode rows
    none; a served DeepSeek-V3 decode step marks its latent core, DeepSeek-V3.2's sparse core
    not (its kernel and modules are the DSA rules')."""
    pytest.importorskip("pyarrow")
    from mlacalc.cost.model_step import step_kernels
    from mlacalc.measured.mapping import decode_path_prompts, map_table
    from mlacalc.measured.tables import load_measured

    for engine, name in (("vllm", "mla_generation_module_perf"),
                         ("vllm", "mla_context_module_perf"),
                         ("trtllm", "generation_mla_perf")):  # fmt: skip
        t = next(x for x in load_measured(MEASURED / "b200_sxm" / "mla", engine=engine).tables
                 if x.table == name)  # fmt: skip
        parts = [p for p in map_table(t).parts if p.batch.kind == "mla_decode"]
        rows = np.concatenate([p.rows for p in parts])
        chain = np.concatenate([p.batch.shape["absorbed_chain"] for p in parts]) > 0
        assert np.all(chain == name.endswith("module_perf")), name
        if name == "mla_context_module_perf":
            assert np.array_equal(np.sort(rows), np.flatnonzero(decode_path_prompts(t)))
    for model, want in (("deepseek-v3", 1), ("deepseek-v3.2", None)):
        step = step_kernels(model, "decode", 2048, 8, scope="attention_layer")
        (core,) = [k for k in step if k.name == "attention"]
        assert core.shape.get("absorbed_chain") == want, model


def test_blackwell_module_rows_of_few_sequences_and_heads_read_near_their_measure():
    """TensorRT-LLM's B200 generation module rows of at most 16 sequences and 16 heads read
    +8% to +12% over (signed median) with the stand-alone-fitted decode chain; with the chain's
    saving (mla_time.CHAIN_SAVING_S) within 5%."""
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured

    t = next(x for x in load_measured(MEASURED / "b200_sxm" / "mla", engine="trtllm").tables
             if x.table == "mla_generation_module_perf")  # fmt: skip
    c = t.columns
    small = (np.asarray(c["batch_size"], float) <= 16) & (np.asarray(c["num_heads"], float) <= 16)
    err = predict_mapped(map_table(t), None, "fit-b200-sxm") / t.seconds - 1.0
    assert small.sum() > 1000
    assert abs(np.median(err[small])) < 0.05
