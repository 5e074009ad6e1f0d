"""Where an MLA model's latent rank or head widths are not a measured kernel row's.

Every measured MLA kernel row is at DeepSeek-V3's geometry (GLM-5's in SGLang's DSA module
tables); a model at another one is timed by the fitted rule carried to a geometry no row has,
which every timed output says (:func:`mla_geometry_note`) and a plan's expected error names
(:mod:`mlacalc.serving.provenance`). Kept apart from :mod:`mlacalc.timemodel.predict`, which
words its warnings with the serving layer's route lines, so that those lines can read these
without an import circle.
"""

from __future__ import annotations

from mlacalc.models.loading import ModelConfig

#: The latent width of every measured MLA kernel row: DeepSeek-V3's geometry (the shared
#: tables' TABLES.md: kv_lora 512, rope 64)
MEASURED_MLA_RANK = 512

#: The MLA geometry of every measured MLA kernel row (TABLES.md's context_mla / generation_mla
#: and module tables: DeepSeek-V3's kv_lora 512, rope 64, nope 128, v 128;
#: ``mlacalc/measured/mapping.py``'s ``DSV3``)
MEASURED_MLA_GEOMETRY = {
    "kv_lora_rank": MEASURED_MLA_RANK,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
}

#: GLM-5's geometry, which SGLang's DSA module tables also measure (``mapping.py``'s
#: ``_GLM5``): a DSA model (``index_topk`` set) at it is within the measured rows
MEASURED_DSA_GEOMETRY = {**MEASURED_MLA_GEOMETRY, "qk_nope_head_dim": 192, "v_head_dim": 256}

#: The words every geometry note carries (tests find the note by them)
MLA_GEOMETRY_SAID = "outside the measured MLA rows"


def mla_geometry_off(m: ModelConfig) -> dict[str, tuple[int, int]]:
    """An MLA model's latent rank and head widths that no measured MLA kernel row has: field ->
    (the model's, the measured), against DeepSeek-V3's geometry (a DSA model: the nearer of it
    and GLM-5's, which the DSA module tables add); empty for a measured geometry or a model
    that is not MLA."""
    if not m.is_mla or not m.kv_lora_rank:
        return {}
    best: dict[str, tuple[int, int]] | None = None
    measured = [MEASURED_MLA_GEOMETRY] + ([MEASURED_DSA_GEOMETRY] if m.index_topk else [])
    for geometry in measured:
        off = {
            f: (int(getattr(m, f)), want)
            for f, want in geometry.items()
            if getattr(m, f) is not None and int(getattr(m, f)) != want
        }
        if best is None or len(off) < len(best):
            best = off
    return best or {}


def mla_geometry_note(*models: ModelConfig) -> str:
    """Where an MLA model's latent rank or head widths are not a measured kernel row's
    (:func:`mla_geometry_off`: MiniCPM3's rank 256 and heads 32 / 64 / 64, a what-if rank, a
    design's narrower heads): its attention core's time is the fitted rule carried to a
    geometry no row has, said in one sentence ("" where every model is at a measured one). Of
    several models (a conversion's rank sweep), every width off is listed once. Every timed
    output carries it (predict_time's warnings, roofline, plan, search, convert, the app): a
    new-user trial read smooth times across kv_lora_rank 128..1,024 and narrower heads with no
    word, and a plan's expected error beside them."""
    off: dict[str, set[int]] = {}
    for m in models:
        for f, (have, _) in mla_geometry_off(m).items():
            off.setdefault(f, set()).add(have)
    if not off:
        return ""
    said = ", ".join(
        f"{f} {', '.join(f'{v:,}' for v in sorted(off[f]))} (measured "
        f"{MEASURED_MLA_GEOMETRY[f]:,}"
        + (
            f" or {MEASURED_DSA_GEOMETRY[f]:,}"
            if MEASURED_DSA_GEOMETRY[f] != MEASURED_MLA_GEOMETRY[f]
            and any(m.index_topk for m in models)
            else ""
        )
        + ")"
        for f in MEASURED_MLA_GEOMETRY
        if f in off
    )
    return (
        f"MLA geometry {said}: {MLA_GEOMETRY_SAID} (every measured MLA kernel row is at "
        "DeepSeek-V3's kv_lora_rank 512, RoPE 64, nope 128, v 128; the DSA module tables add "
        "GLM-5's nope 192, v 256; FlashMLA's and TensorRT-LLM's MLA kernels are built for a "
        "512-wide latent and a 64-wide RoPE key, from recall), so the attention core's time "
        "here is the fitted rule extrapolated and the benchmark's expected error is not "
        "measured for it"
    )
