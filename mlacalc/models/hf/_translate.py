"""Translate a Hugging Face ``config.json`` mapping into the model schema.

The steps are the same for every family; what differs is read from the family unit:
check the keys the translation reads (types first, before any arithmetic), rename the
family's spellings, apply its hook, drop what its architecture does not use, and hand
the result to the schema, which fills absent fields from the family's defaults and
reports every problem at once.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections import Counter
from dataclasses import MISSING
from difflib import SequenceMatcher, get_close_matches
from pathlib import Path
from typing import Any

from mlacalc.models.hf._layer_types import check_layer_types
from mlacalc.models.quantization import modelopt_config, quantization_scheme
from mlacalc.models.registry import (
    COUNT_FREE,
    DEEPSEEK_MOE_WIDTH_FIELDS,
    NOT_MODELLED,
    Family,
    HFInput,
    IgnoredField,
    NamedAfter,
    Problem,
    family_of,
    model_types,
    nearest_model_type,
    resolve_model_type,
)
from mlacalc.models.schema import NO_ROPE, SPECS, ModelConfig, build, raise_problems
from mlacalc.words.dtypes import canonical_dtype
from mlacalc.words.errors import ConfigError, UnknownDtypeError

__all__ = ["import_hf_config", "known_fields", "stray_fields"]

# null is a statement for these fields (no query compression, not MLA, no window)
_NULL_MEANS_NONE = ("q_lora_rank", "kv_lora_rank", "sliding_window")
_MLA = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
_MOE = (
    "n_shared_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "first_k_dense_replace",
    "moe_layer_freq",
    "topk_method",
)

# keys every family's translation reads
_COMMON_INPUTS = {
    "_name_or_path": HFInput("string", "the repository the file came from (names the model)"),
    "name_or_path": HFInput("string", "the repository the file came from (names the model)"),
    "torch_dtype": HFInput("string", "dtype of the released weights"),
    "dtype": HFInput("string", "dtype of the released weights"),
    "quantization_config": HFInput("mapping", "how the released weights are quantized"),
    "text_config": HFInput("mapping", "the language model of a multimodal checkpoint"),
}
_PY_KIND = {"boolean": bool, "string": str, "mapping": dict}


def import_hf_config(
    data: Any,
    origin: str = "config.json",
    *,
    hf_quant: Any = None,
    hf_quant_origin: str = "hf_quant_config.json",
) -> Any:
    """Convert a Hugging Face ``config.json`` mapping into a validated ``ModelConfig``.

    Values the file leaves to the architecture's defaults are filled in by the same
    rules as the Hugging Face configuration class of its ``model_type``, and each is
    listed in ``derived``; the fields that size the model are required all the same, never
    a class default (:func:`mlacalc.model_from_dict` lists them: an MLA family's
    ``n_routed_experts`` among them). Every wrong or missing value is reported in one
    :class:`~mlacalc.words.errors.ConfigError`. ``hf_quant`` is the ModelOpt
    ``hf_quant_config.json`` published beside the file (it becomes the model's
    ``quantization_config``, which it states more fully than config.json does).
    """
    if not isinstance(data, dict):
        raise ConfigError(
            f"a config.json must hold a JSON object, got {type(data).__name__}", source=origin
        )
    quant_note = None
    if hf_quant is not None:
        data = dict(data)
        data["quantization_config"] = modelopt_config(hf_quant, hf_quant_origin)
        algo = data["quantization_config"].get("quant_algo", "?")
        quant_note = f"quantization_config read from {Path(hf_quant_origin).name} (ModelOpt {algo})"
    unit, model_type = _family(data, origin)
    data, stray_notes = _drop_stray(data, unit, model_type)
    problems: list[tuple[str, str, str | None]] = []
    _check_count_free(data, problems)
    data, nonfinite_notes = _nonfinite(data, unit, problems)
    inputs = {**_COMMON_INPUTS, **unit.inputs}
    for key, spec in inputs.items():
        value = data.get(key)
        if value is None:
            continue
        if not isinstance(value, _PY_KIND[spec.kind]) or (
            spec.kind == "string" and len(value) > 10_000
        ):
            problems.append(
                (
                    key,
                    f"must be a {spec.kind}, got {type(value).__name__} ({spec.meaning})",
                    "write true or false without quotes" if spec.kind == "boolean" else None,
                )
            )
        elif spec.refuse_when is not None and value == spec.refuse_when:
            problems.append((key, spec.refuse_why, spec.refuse_fix))
    bad_inputs = {p[0] for p in problems}
    problems += _misspelled_keys(data, unit, model_type)

    raw: dict[str, Any] = {}
    renamed: dict[str, Any] = {}
    for key, value in data.items():
        if not isinstance(key, str):
            continue
        if key in SPECS:
            raw[key] = value
        elif key in unit.renames:
            renamed.setdefault(unit.renames[key], value)
    spelled = {v: k for k, v in unit.renames.items() if k in data}
    for key, value in renamed.items():
        raw.setdefault(key, value)  # the schema's own spelling wins
    for key in unit.alias_wins.get(model_type, ()):
        if data.get(key) is not None:  # an attribute_map alias wins, as in transformers
            raw[unit.renames[key]] = data[key]
            spelled[unit.renames[key]] = key
    nulled: dict[str, str] = {}  # schema field -> the config.json key that held null
    for key in list(raw):
        if raw[key] is None and key not in _NULL_MEANS_NONE and key != "n_routed_experts":
            del raw[key]  # null means "the class default"
            nulled[key] = key if key in data else spelled.get(key, key)
    for key in ("name", "source", "aliases", "display_name", "notes", "weights_dtype"):
        raw.pop(key, None)  # never read from a config.json
    raw["model_type"] = model_type
    derived: list[str] = ([quant_note] if quant_note else []) + nonfinite_notes + stray_notes
    if unit.translate is not None:
        unit.translate(
            {k: v for k, v in data.items() if k not in bad_inputs}, raw, derived, problems
        )
    own = {*unit.reads, *unit.irrelevant, *unit.ignored}  # read in the family's own words
    if "layer_types" not in own and not any(p[0] == "layer_types" for p in problems):
        check_layer_types(data, raw.get("num_hidden_layers"), problems)
    _text_config_wins(data, raw, unit, derived)
    for key in unit.ignored:
        raw.pop(key, None)
    if not unit.mla:
        for key in _MLA:
            if raw.get(key) is None:
                raw.pop(key, None)
    if raw.get("n_routed_experts") is None and "n_routed_experts" in raw:
        del raw["n_routed_experts"]
    experts = raw.get("n_routed_experts")
    no_default = "n_routed_experts" not in unit.defaults_for(model_type)
    if experts == 0 or (experts is None and no_default and "n_routed_experts" not in unit.required):
        for key in _MOE:
            raw.pop(key, None)

    given = {k: data.get(k) for k in ("_name_or_path", "name_or_path") if k not in bad_inputs}
    arch = data.get("architectures")
    arch = tuple(a for a in arch if isinstance(a, str)) if isinstance(arch, list) else ()
    raw["name"], named = _name(given, origin, model_type, arch)
    derived.append(NamedAfter(named))
    raw["source"] = f"Hugging Face config.json: {origin}"
    dtype_key = "torch_dtype" if data.get("torch_dtype") is not None else "dtype"
    dtype = data.get(dtype_key)
    if isinstance(dtype, str) and dtype_key not in bad_inputs:
        try:
            raw["weights_dtype"] = canonical_dtype(dtype.removeprefix("torch."))
        except UnknownDtypeError:
            if dtype.strip().lower() != "auto":  # "auto": the schema default
                problems.append(
                    (
                        dtype_key,
                        f"{dtype[:40]!r} is not a floating-point dtype weights are released in",
                        "use bfloat16, float16, float32 or float8_e4m3fn (or auto)",
                    )
                )
    quantization = data.get("quantization_config")
    if isinstance(quantization, dict) and quantization.get("quant_method") == "fp8":
        raw["weights_dtype"] = "fp8"
    if raw.get("quantization_config") is None:
        _note_external_quantization(data, origin, derived)
    try:
        return build(raw, origin, strict=True, derived=derived, problems=problems)
    except ConfigError as e:
        said = getattr(e, "problems", ())
        if not any(p[0] in nulled for p in said):
            raise
        raise_problems(origin, [_null_said(p, nulled, model_type) for p in said])
        raise  # raise_problems raised already


def _null_said(problem: Problem, nulled: dict[str, str], model_type: str) -> Problem:
    """A field the file holds as null, reported "is missing" (a null is read as the class
    default, and ``model_type`` has none): said as null, with what to write. A trial's
    ``"num_attention_heads": null`` read "field 'num_attention_heads': is missing"."""
    name, message, _fix = problem
    if name not in nulled or not message.startswith("is missing"):
        return problem
    key = nulled[name]
    spelled = f" (as {key})" if key != name else ""
    if name == "qk_rope_head_dim":  # MLA's RoPE width: one message for null and for 0
        return (name, f"is null{spelled}; it {NO_ROPE[1]}", NO_ROPE[2])
    return (
        name,
        f"is null{spelled}, and model_type {model_type} has no default for it",
        f"write its value, {SPECS[name].doc}, as the checkpoint's config.json states it",
    )


#: the MoE's structure in the schema's (DeepSeek's) words, which many classes spell otherwise
_MOE_STRUCTURE = (*DEEPSEEK_MOE_WIDTH_FIELDS, "num_experts_per_tok")


def stray_fields(unit: Family, model_type: str) -> tuple[str, ...]:
    """The schema fields a config.json of ``model_type`` may hold that its Hugging Face class
    ignores (:attr:`Family.stray`); a family without MoE layers ignores every field of the
    MoE's structure but ``n_routed_experts``, which the schema refuses for it (asking for
    experts the type cannot hold)."""
    if not unit.moe:
        return _MOE_STRUCTURE[1:]
    return unit.stray_for(model_type)


def _scopes(data: dict) -> tuple[dict, list[tuple[dict, str]]]:
    """A copy of ``data`` (its ``text_config`` copied too) and the dicts a key is looked up
    in, each with the prefix its notes name it by: the top level and ``text_config``."""
    out = dict(data)
    scopes = [(out, "")]
    if isinstance(out.get("text_config"), dict):
        out["text_config"] = dict(out["text_config"])
        scopes.append((out["text_config"], "text_config."))
    return out, scopes


def _drop_stray(data: dict, unit: Family, model_type: str) -> tuple[dict, list[str]]:
    """``data`` without the fields its class ignores (:func:`stray_fields`), at the top level
    and in ``text_config``, and a note for each one that held a value: a ``qwen3_moe`` file's
    DeepSeek ``n_shared_experts`` changed the counts where transformers reads none."""
    stray = stray_fields(unit, model_type)
    if not stray:
        return data, []
    cls = unit.class_name(model_type)
    notes: list[str] = []
    out, scopes = _scopes(data)
    for scope, prefix in scopes:
        for key in stray:
            if key not in scope:
                continue
            value = scope.pop(key)
            if value is None:
                continue  # null: the class default, which it has none of either
            spelled = next((k for k, v in unit.renames.items() if v == key), None)
            if key not in unit.defaults_for(model_type) and key not in unit.required:
                spelled = None  # a type without it (dense Qwen3): no spelling of it to offer
            why = f"ignores it: use {spelled}" if spelled else "has no such field: remove it"
            shown = json.dumps(value)[:40]
            notes.append(
                IgnoredField(f"{prefix}{key} = {shown} ignored, as transformers' {cls} {why}")
            )
    return out, notes


#: schema fields a config.json never sets (the YAML file's own)
_NOT_FROM_CONFIG = ("name", "source", "aliases", "display_name", "notes", "weights_dtype")
#: config.json keys every family's hook may read besides the schema fields
_HOOK_KEYS = ("layer_types",)


def known_fields(unit: Family) -> set[str]:
    """Every ``config.json`` key the family accounts for: schema fields, its renames, inputs,
    hook reads, ``ignored`` and ``irrelevant`` fields, and the keys every class shares that
    change no count (:data:`~mlacalc.models.registry.COUNT_FREE`)."""
    return (
        set(SPECS)
        | set(unit.renames)
        | set(unit.inputs)
        | set(_COMMON_INPUTS)
        | set(unit.ignored)
        | set(unit.reads)
        | set(unit.irrelevant)
        | set(COUNT_FREE)
        | set(_HOOK_KEYS)
        | {"model_type"}
    )


def _misspelled_keys(data: dict, unit: Family, model_type: str) -> list[Problem]:
    """Keys the family does not read that are a misspelling of a field it reads and that
    the file leaves out: read as written, the field would silently take its default.

    A key is a misspelling when, ignoring case and underscores, it equals the field with
    a trailing ``s`` added or dropped, is at least 90% alike in ``difflib``'s measure
    (one or two letters off in a long name), or is one edit (a letter added, dropped,
    changed, or two neighbours swapped) from a field of 6 letters or more, two from one of
    12 or more (:data:`_EDITS_BY_LENGTH`). Keys the family knows, or that close to a
    field the file states, are not flagged: config.json files hold many keys mlacalc
    does not need.
    """
    scopes = [data]
    if isinstance(data.get("text_config"), dict):
        scopes.append(data["text_config"])
    present = {k for scope in scopes for k in scope if isinstance(k, str)}
    for key, target in unit.renames.items():
        if key in present:
            present.add(target)
    read = known_fields(unit)
    fields = [
        f
        for f in (*SPECS, *unit.renames, *unit.inputs, *unit.reads)
        if f not in _NOT_FROM_CONFIG
        and f not in present
        and not (f in unit.renames and unit.renames[f] in present)
    ]
    values = {unit.renames.get(k, k): v for scope in reversed(scopes) for k, v in scope.items()}
    problems: list[Problem] = []
    for key in sorted(present - read):
        field = _closest(key, fields)
        if field is None or _closest(key, sorted((present - {key}) & read)) is not None:
            continue
        problems.append(
            (
                key,
                f"'{key}' is not a field of {model_type}; did you mean '{field}'? "
                f"({_when_absent(unit.renames.get(field, field), unit, model_type, values)})",
                f"rename it to '{field}'",
            )
        )
    return problems


def _when_absent(name: str, unit: Family, model_type: str, values: dict) -> str:
    """What the field ``name`` becomes when the file leaves it out."""
    rule = unit.defaults_for(model_type).get(name)
    if rule is not None:
        try:
            value = rule.resolve(values)
        except (KeyError, TypeError, ArithmeticError):
            return f"absent, it would take the rule {rule.why}"
        return f"absent, it would default to {value!r}: {rule.why}"
    default = ModelConfig.__dataclass_fields__[name].default if name in SPECS else None
    if name in SPECS and default is None:
        return f"absent, it would be null: {SPECS[name].doc}"
    if name in SPECS and not isinstance(default, type(MISSING)):
        return f"absent, it would default to {default!r}: {SPECS[name].doc}"
    return "absent, it would be read as not set"


def _edits(a: str, b: str, most: int) -> int:
    """The optimal-string-alignment distance of ``a`` and ``b`` (insertions, deletions,
    substitutions and swaps of two neighbours, each one edit), or ``most + 1`` when above
    ``most``."""
    if abs(len(a) - len(b)) > most:
        return most + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], prev2[j - 2] + 1)
        prev2, prev = prev, row
    return min(prev[-1], most + 1)


#: the edits (see :func:`_edits`) a key may be from a field of at least so many letters and
#: still read as its misspelling: one in a name of 6 or more (q_lora_rnak, whose 0.889 in
#: difflib's measure missed 0.9), two in one of 12 or more; no unknown key of the 142 shipped
#: and reference config.json files is that close to a field they leave out
_EDITS_BY_LENGTH = ((12, 2), (6, 1))


def _norm(text: str) -> str:
    return text.lower().replace("_", "").replace("-", "")


@functools.lru_cache(maxsize=4096)
def _letters(text: str) -> tuple[str, dict[str, int]]:
    """``text`` compared as :func:`_closest` compares it, and its letters counted."""
    n = _norm(text)
    return n, Counter(n)


def _share(matches: int, length: int) -> float:
    """``difflib``'s ratio of ``matches`` in sequences of ``length`` letters together."""
    return 2.0 * matches / length if length else 1.0


def _closest(key: str, fields: list[str]) -> str | None:
    """The field ``key`` is a misspelling of, or None."""
    return _closest_of(key, tuple(fields))


@functools.lru_cache(maxsize=65536)
def _closest_of(key: str, fields: tuple[str, ...]) -> str | None:
    """:func:`_closest`, kept for the next file with the same key and fields (a config read
    again, or read with one field changed, asks the same questions)."""
    k, kc = _letters(key)
    best, score = None, (3, 0.0)
    for name in fields:
        f, fc = _letters(name)
        if k == f or k + "s" == f or k == f + "s":
            return name
        most = next((n for size, n in _EDITS_BY_LENGTH if len(f) >= size), 0)
        # upper bounds of the ratio below both cuts: neither alike nor within ``most`` edits (a
        # key within e edits shares at least max(lengths) - e letters in order with the field,
        # so its quick ratio is at least 1 - e / len(f)); the edit distance, a quadratic loop
        # over every pair of the file's keys and the family's fields, only past this filter.
        # The bounds are SequenceMatcher's real_quick_ratio (the shorter length) and
        # quick_ratio (the letters in common, in any order), counted here without building a
        # matcher for every pair (each import read every key against every field: ~85 ms)
        cut = min(0.9, 1.0 - most / len(f) - 1e-9) if most else 0.9  # (the bound itself kept)
        length = len(k) + len(f)
        if _share(min(len(k), len(f)), length) < cut:
            continue
        if _share(sum(min(c, fc.get(ch, 0)) for ch, c in kc.items()), length) < cut:
            continue
        edits = _edits(k, f, most)
        ratio = SequenceMatcher(None, k, f).ratio()
        if edits > most and ratio < 0.9:
            continue
        if (min(edits, 2), -ratio) < (score[0], -score[1]):
            best, score = name, (min(edits, 2), ratio)
    return best


#: activation names: transformers' ACT2FN (transformers 5.23, activations.py), and the names
#: of remote-code families the shipped references use (MiniMax-M3 swigluoai, Kimi-K3 situ)
_ACTIVATIONS = frozenset(
    (
        *("gelu", "gelu_10", "gelu_accurate", "gelu_fast", "gelu_new", "gelu_python"),
        *("gelu_python_tanh", "gelu_pytorch_tanh", "hardswish", "laplace", "leaky_relu"),
        *("linear", "mish", "prelu", "quick_gelu", "relu", "relu2", "relu6", "sigmoid"),
        *("silu", "sqrtsoftplus", "swish", "tanh", "xielu", "swigluoai", "situ"),
    )
)
#: a norm's epsilon, under the names the families use
_EPS_KEYS = ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_eps")
_ACTIVATION_KEYS = (
    "hidden_act",
    "hidden_activation",
    "activation_function",
    "activation",
    "mlp_hidden_act",
    "mamba_hidden_act",
)


def _check_count_free(data: dict, problems: list) -> None:
    """Fields that change no count but whose value transformers would refuse or that cannot
    be a model's, checked for every family (top level and ``text_config``): an activation
    transformers does not know, a rotary base that is not a positive finite number. Read
    before the non-finite values of such fields are dropped with a note."""
    scopes = [(data, "")]
    if isinstance(data.get("text_config"), dict):
        scopes.append((data["text_config"], "text_config."))
    for scope, prefix in scopes:
        for key in _ACTIVATION_KEYS:
            value = scope.get(key)
            if value is None or (isinstance(value, str) and value in _ACTIVATIONS):
                continue
            near = get_close_matches(str(value), sorted(_ACTIVATIONS), n=1)
            problems.append(
                (
                    f"{prefix}{key}",
                    f"{str(value)[:40]!r} is not an activation transformers knows",
                    f"did you mean {near[0]!r}?" if near else "e.g. silu or gelu_pytorch_tanh",
                )
            )
        bases = [(f"{prefix}rope_theta", scope.get("rope_theta"))]
        rope = scope.get("rope_parameters")
        if isinstance(rope, dict):  # one mapping, or one per layer type (Gemma 3)
            bases.append((f"{prefix}rope_parameters.rope_theta", rope.get("rope_theta")))
            bases += [
                (f"{prefix}rope_parameters.{kind}.rope_theta", sub.get("rope_theta"))
                for kind, sub in rope.items()
                if isinstance(sub, dict)
            ]
        for field, value in bases:
            if value is not None and not _positive_number(value):
                problems.append(
                    (field, f"must be a positive number (the rotary base), got {value!r}", None)
                )
        _check_norm_and_scaling(scope, prefix, problems)


def _positive_number(value: Any, zero: bool = False) -> bool:
    """A finite number above 0 (at least 0 with ``zero``); booleans are not numbers."""
    return (
        not isinstance(value, bool)
        and isinstance(value, (int, float))
        and math.isfinite(value)
        and (value >= 0 if zero else value > 0)
    )


def _check_norm_and_scaling(scope: dict, prefix: str, problems: list) -> None:
    """A norm's epsilon (a finite number, at least 0: NaN makes every activation NaN) and
    ``rope_scaling`` (a mapping or null, as transformers' rope validation reads it; its
    ``factor`` a positive finite number)."""
    for key in _EPS_KEYS:
        value = scope.get(key)
        if value is not None and not _positive_number(value, zero=True):
            problems.append(
                (
                    f"{prefix}{key}",
                    f"must be a finite number of at least 0 (the norm's epsilon), got {value!r}",
                    "e.g. 1e-05 or 1e-06, as the checkpoint's config.json states it",
                )
            )
    scaling = scope.get("rope_scaling")
    if scaling is not None and not isinstance(scaling, dict):
        problems.append(
            (
                f"{prefix}rope_scaling",
                f"must be a mapping or null, got {str(scaling)[:40]!r}",
                'e.g. {"rope_type": "linear", "factor": 2.0}, or null for none',
            )
        )
    elif (
        isinstance(scaling, dict)
        and scaling.get("factor") is not None  # absent or null: no factor stated
        and not _positive_number(scaling["factor"])  # 0 too (`or 1.0` had read it as 1)
    ):
        problems.append(
            (
                f"{prefix}rope_scaling.factor",
                f"must be a positive number, got {scaling['factor']!r}",
                "the context's scaling over the trained one, e.g. 8.0",
            )
        )


def _holds_nonfinite(value: Any, depth: int = 0) -> str | None:
    """``"Infinity"``, ``"-Infinity"`` or ``"NaN"`` when a value holds such a float."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if depth < 8 and isinstance(value, (list, tuple)):
        return next((h for v in value if (h := _holds_nonfinite(v, depth + 1))), None)
    if depth < 8 and isinstance(value, dict):
        return next((h for v in value.values() if (h := _holds_nonfinite(v, depth + 1))), None)
    return None


def _nonfinite(data: dict, unit: Family, problems: list) -> tuple[dict, list[str]]:
    """Keys holding ``Infinity`` or ``NaN``: dropped with a note where the family lists the
    field as changing no count (``irrelevant``, ``ignored``, ``COUNT_FREE``), refused naming
    the field anywhere else."""
    quiet = set(unit.irrelevant) | set(unit.ignored) | set(COUNT_FREE)
    notes: list[str] = []
    out, scopes = _scopes(data)
    for scope, prefix in scopes:
        for key in list(scope):
            held = _holds_nonfinite(scope[key]) if key != "text_config" else None
            if held is None:
                continue
            if key in quiet:
                del scope[key]
                notes.append(f"{prefix}{key} holds {held}: read as nothing (it changes no count)")
            else:
                problems.append(
                    (f"{prefix}{key}", f"holds {held}, which is not a finite number", None)
                )
                del scope[key]
    return out, notes


#: fields a multimodal wrapper may state for itself, apart from its text_config
_WRAPPER_OWN = ("tie_word_embeddings", "quantization_config", "name", "source", "model_type")


def _text_config_wins(data: dict, raw: dict, unit: Family, derived: list[str]) -> None:
    """A schema field stated both at the top of the file and in ``text_config`` with another
    value is read from ``text_config`` (the language model transformers builds), with a note
    naming the field: a top-level ``hidden_size`` never silently overrides it."""
    text = data.get("text_config")
    if not isinstance(text, dict):
        return
    inner = {unit.renames.get(k, k): v for k, v in text.items() if isinstance(k, str)}
    for key, value in data.items():
        field = unit.renames.get(key, key) if isinstance(key, str) else None
        if field not in SPECS or field in _WRAPPER_OWN or field not in inner:
            continue
        if value is None or inner[field] is None or inner[field] == value:
            continue
        if raw.get(field) == value:
            raw[field] = inner[field]
            derived.append(
                f"{field} = {inner[field]!r} from text_config (the top-level {key}: {value!r} "
                "is not the language model's)"
            )


def _note_external_quantization(data: dict, origin: str, derived: list[str]) -> None:
    """A checkpoint that keeps its quantization outside config.json (a ModelOpt export's
    hf_quant_config.json) is sized by weights_dtype; ``derived`` says so."""
    name = data.get("_name_or_path")
    scheme = quantization_scheme({"_name_or_path": name if isinstance(name, str) else ""}, origin)
    if scheme is not None and scheme.method == "external":
        derived.append(f"quantization_config = None ({scheme.note}; weights sized by dtype)")


def _family(data: dict, origin: str) -> tuple[Family, str]:
    model_type = data.get("model_type")
    if not isinstance(model_type, str) or not model_type.strip():
        shown = type(model_type).__name__ if model_type is not None else "nothing"
        raise ConfigError(
            f"must be a string naming the architecture, got {shown}",
            source=origin,
            field="model_type",
            fix="supported: " + ", ".join(model_types()),
        )
    unit = family_of(model_type[:200])
    if unit is None and model_type in NOT_MODELLED:  # known, not modelled: no look-alike hint
        raise ConfigError(
            f"model_type {model_type!r} is not modelled: {NOT_MODELLED[model_type]}",
            source=origin,
            field="model_type",
            fix="supported: " + ", ".join(model_types()),
        )
    if unit is None:
        near = nearest_model_type(model_type[:200])
        hint = f"did you mean '{near}'? " if near else ""
        raise ConfigError(
            f"unsupported model_type {model_type[:60]!r}",
            source=origin,
            field="model_type",
            fix=f"{hint}supported: " + ", ".join(model_types()),
        )
    return unit, resolve_model_type(model_type)


#: folder names that say nothing of the model in them (a download's, a training run's or a
#: work folder's), compared in lower case with "-" and " " read as "_"
GENERIC_FOLDERS = frozenset({
    "model", "models", "config", "configs", "checkpoint", "checkpoints", "ckpt", "ckpts", "hf",
    "hf_model", "hf_models", "hf_checkpoint", "main", "tmp", "temp", "weights",
    "model_weights", "final", "latest", "last", "best", "output", "outputs", "out", "export",
    "exported", "merged", "pretrained", "trained", "saved", "saved_model", "snapshot",
    "snapshots", "hub", "blobs", "cache", "huggingface", "hf_cache", "downloads", "download",
    "home", "data", "work",
})  # fmt: skip
#: a training step's or run's folder (checkpoint-1000, global_step500, step_20, epoch3)
_STEP_FOLDER = re.compile(
    r"(checkpoint|checkpoints|ckpt|global_?step|step|steps|iter|iteration|epoch|run)_?\d+"
)
#: a version's folder (v2, v0.3, version_1.2.0, rev3): which model it is the folder leaves
#: unsaid, and a folder above that names the model names it with the version
_VERSION_FOLDER = re.compile(r"(v|version|rev|revision)_?\d+(\.\d+)*")
#: a bare size (1.5b, 70B, 8x7b, 125m): which model it is the folder leaves unsaid
_BARE_SIZE = re.compile(r"(\d+x)?\d+(\.\d+)?[kmbt]")
#: the Hub cache's folder of one repository, models--<org>--<name> (its / written as --)
_HUB_REPO = "models--"
#: how many folders up from a config.json's own one the naming looks (the Hub cache's
#: models--org--name/snapshots/<hash>/config.json names its model two folders up)
_FOLDERS_UP = 2


def says_nothing(folder: str) -> bool:
    """Whether a folder's (or file's) name says nothing of the model it holds: shorter than
    three characters, no letter, a snapshot's hex hash (12 hex digits or more), a generic
    word (:data:`GENERIC_FOLDERS`), a training step's folder (checkpoint-1000, global_step500)
    or a bare size (1.5b, 70B)."""
    name = folder.strip().lower().replace("-", "_").replace(" ", "_")
    hexadecimal = len(name) >= 12 and all(c in "0123456789abcdef" for c in name)
    return (
        len(name) < 3
        or not any(c.isalpha() for c in name)
        or hexadecimal
        or name in GENERIC_FOLDERS
        or _STEP_FOLDER.fullmatch(name) is not None
        or _VERSION_FOLDER.fullmatch(name) is not None
        or _BARE_SIZE.fullmatch(name) is not None
    )


#: a model's size in a name (70B, 1.5b, 8x7B, A2.7B, 125m) between separators
_SIZE_IN_NAME = re.compile(r"(?:^|[-_. ]|a)(\d+x)?\d+(\.\d+)?[bm](?=$|[-_. ])")


def family_words(model_type: str, architectures: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The model's family as a name would write it, lower case: the letters ``model_type``
    and each architecture begin with (``qwen2_moe`` -> ``qwen``, ``LlamaForCausalLM`` ->
    ``llama``), three letters or more."""
    out = []
    for word in (model_type, *architectures):
        head = re.match(r"[a-z]+", word.lower())
        if head and len(head.group()) >= 3 and head.group() not in out:
            out.append(head.group())
    return tuple(out)


def names_a_model(folder: str, families: tuple[str, ...]) -> bool:
    """Whether a folder above a config.json's own one names a model: it says something
    (:func:`says_nothing`) and writes the model's family (:func:`family_words`) or a size
    (Llama-3.3-70B-Instruct, my-llama-finetune, Mixtral-8x7B); a folder of a user, a project
    or a run (alice, team, exp) names no model, so it does not name this one."""
    if says_nothing(folder):
        return False
    name = folder.strip().lower()
    squeezed = re.sub(r"[-_. ]", "", name)
    return any(f in squeezed for f in families) or _SIZE_IN_NAME.search(name) is not None


def _named_part(parts: list[str], families: tuple[str, ...] = ()) -> tuple[str, str] | None:
    """The nearest of a path's last parts that names the model, looking at most
    :data:`_FOLDERS_UP` parts past the last, and the part as written: the last where it says
    something (:func:`says_nothing`), a folder above it where it names a model
    (:func:`names_a_model`: ``alice/ckpt`` is a user's folder, not a model), a Hub cache
    folder ``models--org--name`` (``name``) at any of them. None where none of them does. A
    version's folder under the part that names the model adds its version once
    (``Mistral-7B/v0.3``: ``Mistral-7B-v0.3``; the version alone named it ``v0.3``;
    ``Mistral-7B-v0.3/v0.3`` keeps ``Mistral-7B-v0.3``), and is not counted among the folders
    looked at (``Mistral-7B/v0.3/snapshots/<hash>``: ``Mistral-7B-v0.3``)."""
    version, looked = "", 0
    for up, part in enumerate(reversed(parts)):
        if looked > _FOLDERS_UP:
            break
        hub = part.startswith(_HUB_REPO)
        name = part.split("--")[-1] if hub else part
        if (up == 0 or hub) and not says_nothing(name):
            return _versioned(name, version if up else ""), part
        if up and names_a_model(name, families):
            return _versioned(name, version), part
        if _VERSION_FOLDER.fullmatch(part.strip().lower().replace("-", "_")):
            version = version or part.strip()  # the nearest version's folder
            continue
        looked += 1
    return None


def _versioned(name: str, version: str) -> str:
    """``name`` with ``version`` (a version's folder under it) joined, unless it writes it."""
    if not version:
        return name
    said = re.search(rf"(?:^|[-_. ]){re.escape(version.lower())}(?=$|[-_ ])", name.lower())
    return name if said else f"{name}-{version}"


def _name(
    given: dict[str, Any], origin: str, model_type: str, architectures: tuple[str, ...] = ()
) -> tuple[str, str]:
    """The model's name and where it came from, the one naming of a config.json every route
    reads (load_model, plan, search, import-hf): the last part of ``_name_or_path`` (else
    ``name_or_path``) where that is a repository id or a path (``meta-llama/Llama-2-7b-hf``: a
    downloaded ``config.json`` sits in a folder named by a snapshot hash, so its own name says
    nothing), else the file's folder (or name) where it says something of the model, else
    the nearest of the :data:`_FOLDERS_UP` folders above it that names a model: the Hub
    cache's ``models--meta-llama--Llama-3.3-70B-Instruct/snapshots/<hash>``, or a folder
    writing the model's family or a size (``Llama-3.3-70B-Instruct/checkpoint-1000``;
    :func:`names_a_model`: not ``alice/ckpt``, a user's folder), else a bare
    ``_name_or_path``, else ``model_type``. A path in ``_name_or_path`` is read by the same
    rules. A path's part that is a hash, a generic word, a
    training step's folder or a bare size says nothing (:func:`says_nothing`). A bare word in
    ``_name_or_path`` (``llama_nemotron_super``) is the exporter's alias, not the repository's
    name."""
    own = Path(origin)
    config = own.name == "config.json"
    stem = own.parent.name if config else own.stem
    if stem.lower().endswith(".config") and len(stem) > len(".config"):
        stem = stem[: -len(".config")]  # minicpm-2b.config.json names minicpm-2b
    where = "folder" if config else "file name"
    parts = [p for p in own.parent.parts if p not in ("/", "\\")] + ([] if config else [stem])
    tried = [(k, (v or "").strip().rstrip("/")) for k, v in given.items()]
    families = family_words(model_type, architectures)
    picks = []
    for k, v in tried:
        named = _named_part(v.split("/"), families) if "/" in v else None
        if named is not None:
            last = "the last part" if named[1] == v.split("/")[-1] else f"the part {named[1]!r}"
            picks.append((named[0], f"{last} of {k} {v!r}"))
    nothing = "(no repository id in _name_or_path/name_or_path"
    named = _named_part(parts, families)
    if named is None:
        above = ", nor the folders above it" if len(parts) > 1 else ""
        nothing += f"; its {where} {stem!r} says nothing of the model{above})" if stem else ")"
    else:
        if named[1] == stem:
            picks.append((named[0], f"its {where} {stem!r} {nothing})"))
        else:
            hub = "the Hub cache's folder" if named[1].startswith(_HUB_REPO) else "the folder"
            versioned = named[0] != named[1].split("--")[-1]  # Mistral-7B/v0.3
            version = named[0][len(named[1].split("--")[-1]) + 1 :] if versioned else ""
            said = "its version" if version == stem else "says nothing of the model"
            if version and version != stem:  # a version's folder between them
                said += f", the folder {version!r} its version"
            picks.append(
                (named[0], f"{hub} {named[1]!r} above it {nothing}; its {where} {stem!r} {said})")
            )
        nothing += ")"
    picks += [(v, f"{k} {v!r}") for k, v in tried if "/" not in v and not says_nothing(v)]
    picks += [(model_type, f"model_type {model_type!r} {nothing}")]
    for name, how in picks:
        name = name.strip().lower().replace(" ", "-").replace("_", "-")[:200]
        if name:
            return name, f"named {name!r} after {how}"
    return model_type.replace("_", "-"), f"named after model_type {model_type!r}"
