"""Rules the family units of layered models share: reading the per-layer pattern of a
``config.json`` into the schema's compact fields, and lifting a multimodal wrapper's
``text_config``.

A pattern is modelled when it is periodic: every ``k``-th layer (1-based) full and the
others sliding or chunked (``full_attention_interval: k``), or every layer alike. A
``layer_types`` list that is not is refused by name, as is a MoE placement other than
every layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mlacalc.models.schema import SPECS

__all__ = ["check_every_layer_moe", "check_layer_types", "lift_text_config", "read_layer_types"]

#: the ``layer_types`` values transformers accepts (transformers 5.23, configuration_utils.py
#: ALLOWED_LAYER_TYPES); a class given another, or a list of another length than its layers,
#: raises
UPSTREAM_LAYER_TYPES = (
    *("full_attention", "sliding_attention", "chunked_attention", "window_attention"),
    *("indexed_attention", "compressed_sparse_attention", "heavily_compressed_attention"),
    *("minimax_m3_sparse", "conv", "moe", "hybrid", "hybrid_sliding"),
    *("reference_sliding_attention", "linear_attention", "sparse", "dense"),
)


def check_layer_types(data: Mapping[str, Any], n: Any, problems: list) -> None:
    """``layer_types`` (top level or ``text_config``) of a family that models no per-layer
    pattern: as transformers checks it, a list of known types, one per layer. The file's
    types are not read further (the family's class attends the same way in every layer)."""
    field, types = "layer_types", data.get("layer_types")
    text = data.get("text_config")
    if types is None and isinstance(text, Mapping):
        field, types = "text_config.layer_types", text.get("layer_types")
    if types is None:
        return
    if not isinstance(types, list):
        problems.append((field, "must list one type per layer", None))
        return
    bad = [t for t in types if not isinstance(t, str) or t not in UPSTREAM_LAYER_TYPES]
    if bad:
        problems.append(
            (
                field,
                f"unknown layer type {str(bad[0])[:40]!r}",
                "use a type transformers knows, e.g. full_attention",
            )
        )
    elif isinstance(n, int) and not isinstance(n, bool) and len(types) != n:
        problems.append(
            (
                field,
                f"lists {len(types)} layers, num_hidden_layers is {n}",
                "list one type per layer",
            )
        )


def read_layer_types(
    data: Mapping[str, Any],
    raw: dict[str, Any],
    derived: list[str],
    problems: list,
    *,
    off: str,
    default_interval: int | None,
    interval_key: str | None = None,
) -> None:
    """Set ``full_attention_interval`` from ``layer_types`` (or the family's default rule).

    ``off`` is the ``layer_types`` name of the non-full layers (``sliding_attention`` or
    ``chunked_attention``); ``interval_key`` a config.json key that states the period
    (Gemma 3: ``sliding_window_pattern``).
    """
    n = raw.get("num_hidden_layers")
    if not isinstance(n, int) or n <= 0:
        return  # the schema reports num_hidden_layers
    interval = default_interval
    if interval_key is not None and data.get(interval_key) is not None:
        interval = data[interval_key]
        if isinstance(interval, bool) or not isinstance(interval, int) or interval <= 0:
            problems.append((interval_key, f"must be a positive integer, got {interval!r}", None))
            return
        hi = SPECS["full_attention_interval"].hi
        if interval > hi:  # named as the file names it, not as the field it becomes
            problems.append(
                (
                    interval_key,
                    f"is {interval:,}, above the bound of {hi:,}",
                    "mlacalc reads values up to this bound (docs/config-schema.md)",
                )
            )
            return
    types = data.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != n:
            problems.append(
                ("layer_types", f"must list one type per layer (num_hidden_layers: {n})", None)
            )
            return
        full = [i + 1 for i, t in enumerate(types) if t == "full_attention"]
        other = {t for t in types if t != "full_attention"}
        if other - {off}:
            bad = sorted(other - {off})[0]
            problems.append(
                (
                    "layer_types",
                    f"layer type {bad!r} is not modelled for {data.get('model_type')}",
                    f"the nearest modelled types are full_attention and {off}",
                )
            )
            return
        if not other:
            interval = 1
        elif (
            full
            and all(f == (j + 1) * full[0] for j, f in enumerate(full))
            and (len(full) == n // full[0])
        ):
            interval = full[0]
        elif not full:
            interval = None
        else:
            problems.append(
                (
                    "layer_types",
                    "only a periodic pattern (every k-th layer full) is modelled",
                    "write full_attention every k-th layer",
                )
            )
            return
        derived.append(f"full_attention_interval = {interval!r} (read from layer_types)")
    elif interval is not None:
        derived.append(f"full_attention_interval = {interval!r} ({data.get('model_type')} rule)")
    if interval == 1:
        raw.pop("sliding_window", None)
        raw.pop("attention_chunk_size", None)
        interval = None
    raw["full_attention_interval"] = interval


def lift_text_config(
    data: Mapping[str, Any], raw: dict[str, Any], renames: Mapping[str, str]
) -> dict[str, Any]:
    """Copy a wrapper's ``text_config`` fields into ``raw`` (the file's own keys win) and
    return the text config (the data itself when there is none)."""
    text = data.get("text_config")
    if not isinstance(text, Mapping):
        return dict(data)
    for key, value in text.items():
        target = renames.get(key, key)
        if target in SPECS and target not in ("name", "source", "model_type") and value is not None:
            raw.setdefault(target, value)
    merged = dict(text)
    merged["model_type"] = data.get("model_type")
    return merged


def read_mlp_layer_types(data: Mapping[str, Any], raw: dict, derived: list, problems: list) -> None:
    """``mlp_layer_types`` (``"dense"`` / ``"sparse"`` per layer) read as
    ``first_k_dense_replace`` when its dense layers lead; any other placement is refused."""
    kinds = data.get("mlp_layer_types")
    if kinds is None:
        return
    dense = 0
    while isinstance(kinds, list) and dense < len(kinds) and kinds[dense] == "dense":
        dense += 1
    if not isinstance(kinds, list) or any(k != "sparse" for k in kinds[dense:]):
        problems.append(
            (
                "mlp_layer_types",
                "only leading dense layers followed by MoE layers are modelled",
                "write 'dense' for the first layers and 'sparse' for the rest",
            )
        )
        return
    raw["first_k_dense_replace"] = dense
    derived.append(f"first_k_dense_replace = {dense} (read from mlp_layer_types)")


def check_every_layer_moe(data: Mapping[str, Any], problems: list, key: str, default: Any) -> None:
    """Refuse a MoE placement key whose value differs from "every layer" (``default``)."""
    value = data.get(key)
    if value is not None and value != default:
        problems.append(
            (
                key,
                f"{key}: {value!r} is not modelled; only a MoE FFN in every layer is",
                f"use {key}: {default!r}",
            )
        )
