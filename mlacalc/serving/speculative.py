"""Speculative decoding with the model's own MTP module, as engines run it: each decode step
drafts ``k`` tokens per sequence (one MTP layer and the head per draft token), then verifies
them with the ``k + 1`` positions in one forward pass of the model; it yields the acceptance
length ``tau`` tokens per sequence on average (1 to ``k + 1``). Those ``k + 1`` positions are
what the step's batch carries: the tokens per step the engine's budget and its CUDA graphs count
(:mod:`mlacalc.serving.scheduler`), the rows of every GEMM, the queries of attention.

The acceptance length is an input: either given (``mtp_acceptance_length``, what engines and
posts report) or from a per-token acceptance rate ``a`` (``tau = 1 + a + a^2 + ... + a^k``,
each draft accepted only after the one before it). Without either, a model with an MTP module
takes the published figure for its draft count where one exists (:data:`PUBLISHED_LENGTHS`).
"""

from __future__ import annotations

from mlacalc.words.errors import InvalidArgumentError

__all__ = ["PUBLISHED_LENGTHS", "acceptance_length"]

#: Published acceptance lengths of DeepSeek-V3's MTP module by draft tokens, with the source:
#: 1 draft: "the acceptance rate of the second token prediction ranges between 85% and 90%"
#: (DeepSeek-V3 technical report, arXiv 2412.19437v2, section 5.4.3; the lower end taken);
#: 2 and 3 drafts (SGLang's "3-token" and "4-token" MTP windows, top-k 1): 2.18 and 2.44
#: (LMSYS blog 2025-07-17, DeepSeek-V3 on 16 H200 at 65,536 input tokens).
PUBLISHED_LENGTHS = {
    1: (1.85, "DeepSeek-V3 technical report, 85-90% for the second token (85% taken)"),
    2: (2.18, "LMSYS MTP blog 2025-07-17, 3-token window, top-k 1"),
    3: (2.44, "LMSYS MTP blog 2025-07-17, 4-token window, top-k 1"),
}


def acceptance_length(
    label: str, has_mtp: bool, k: int, rate: float | None, length: float | None
) -> tuple[float, str]:
    """The tokens a step yields per sequence with ``k`` draft tokens, and a note when a
    published default was taken; ``rate`` and ``length`` as the arguments gave them (checked
    by the caller to be numbers)."""
    if not k:
        for name, value in (("mtp_acceptance", rate), ("mtp_acceptance_length", length)):
            if value is not None:  # without draft tokens it would be dropped without a word
                raise InvalidArgumentError(
                    name, "applies to draft tokens: give mtp_tokens (--mtp-tokens) with it"
                )
        return 1.0, ""
    if rate is not None and length is not None:
        raise InvalidArgumentError(
            "mtp_acceptance_length", "give either mtp_acceptance or mtp_acceptance_length"
        )
    if length is not None:
        if not 1.0 <= length <= k + 1:
            raise InvalidArgumentError(
                "mtp_acceptance_length",
                f"must be between 1 and 1 + mtp_tokens = {k + 1}, got {length!r}",
            )
        return float(length), ""
    if rate is not None:
        return 1.0 + sum(rate**i for i in range(1, k + 1)), ""
    if has_mtp and k in PUBLISHED_LENGTHS:
        tau, source = PUBLISHED_LENGTHS[k]
        return tau, f"MTP acceptance length {tau} for {k} draft token(s) of {label}: {source}"
    raise InvalidArgumentError(
        "mtp_acceptance",
        f"give the draft tokens' acceptance rate (mtp_acceptance) or length "
        f"(mtp_acceptance_length) with mtp_tokens={k}: no published figure for {k} drafts",
    )
