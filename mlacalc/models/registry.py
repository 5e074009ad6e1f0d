"""The registry of model families: what each Hugging Face ``model_type`` means to mlacalc.

A family unit is one small module in :mod:`mlacalc.models.hf` that calls :func:`register` with a
:class:`Family`. The unit says which ``model_type`` values it covers, which parameter
layout they follow, how its ``config.json`` spells the schema's fields, which values
an absent field takes (the Hugging Face class defaults of that model type, each
listed in ``ModelConfig.derived`` when used), and which settings it refuses because
mlacalc does not model them. The schema and the loaders consult the registry; they
never test a model_type by name.

This module imports nothing from the rest of mlacalc, so the schema can import it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from difflib import get_close_matches
from typing import Any

__all__ = [
    "COUNT_FREE",
    "NOT_MODELLED",
    "Default",
    "Family",
    "HFInput",
    "NamedAfter",
    "families",
    "family_of",
    "model_types",
    "nearest_model_type",
    "register",
    "resolve_model_type",
]

#: Parameter layouts the counting code knows (see mlacalc.cost.params and mlacalc.cost.engine).
LAYOUTS = ("llama", "gpt2", "falcon", "deepseek", "minicpm3")

#: Configuration fields many Hugging Face classes read that change no parameter, cache byte or
#: FLOP mlacalc counts (field -> why). A family lists its own such fields in
#: ``Family.irrelevant``; the two together, with what the family reads, must cover every field
#: its Hugging Face class reads (``tests/test_models_fields_read.py``).
COUNT_FREE: Mapping[str, str] = {
    **dict.fromkeys(
        ("bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id"),
        "a token id of the tokenizer",
    ),
    **dict.fromkeys(
        (
            "image_token_id",
            "image_token_index",
            "video_token_id",
            "video_token_index",
            "audio_token_id",
            "audio_token_index",
            "vision_start_token_id",
            "vision_end_token_id",
            "boi_token_id",
            "boi_token_index",
            "eoi_token_id",
            "eoi_token_index",
            "boa_token_id",
            "eoa_token_id",
            "eoa_token_index",
        ),
        "a token id of the multimodal prompt",
    ),
    **dict.fromkeys(
        ("vision_config", "audio_config"),
        "a vision or audio tower: reported apart from the language model",
    ),
    "use_cache": "whether a forward returns its cache (a runtime switch)",
    "initializer_range": "the spread of initial weights (training)",
    **dict.fromkeys(
        (
            "attention_dropout",
            "hidden_dropout",
            "embedding_dropout",
            "residual_dropout",
            "embd_pdrop",
            "resid_pdrop",
            "attn_pdrop",
            "mlp_dropout",
            "classifier_dropout",
            "projector_dropout",
        ),
        "dropout (training only)",
    ),
    **dict.fromkeys(
        (
            "rope_parameters",
            "rope_scaling",
            "rope_theta",
            "original_max_position_embeddings",
            "rope_interleave",
            "partial_rotary_factor",
        ),
        "rotary frequencies and their scaling: no parameter, and the rotation is element-wise",
    ),
    **dict.fromkeys(
        ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_epsilon", "norm_eps"),
        "a norm's epsilon",
    ),
    **dict.fromkeys(
        ("hidden_act", "hidden_activation", "activation_function", "activation"),
        "the activation function (element-wise; the gated or plain MLP shape is the layout's)",
    ),
    **dict.fromkeys(
        ("output_router_logits", "router_aux_loss_coef", "router_jitter_noise", "aux_loss_alpha"),
        "a router's training loss or noise",
    ),
    **dict.fromkeys(
        ("norm_topk_prob", "routed_scaling_factor", "scoring_func"),
        "how routing weights are picked and scaled: the same experts' products run",
    ),
    **dict.fromkeys(
        (
            "max_length",
            "model_max_length",
            "tokenizer_class",
            "_from_model_config",
            "attn_implementation",
        ),
        "bookkeeping of the export or the tokenizer",
    ),
    "pretraining_tp": "the tensor-parallel split used in pretraining: the same products",
    **dict.fromkeys(
        (
            "logit_scale",
            "logits_scaling",
            "final_logit_softcapping",
            "attn_logit_softcapping",
            "query_pre_attn_scalar",
            "attention_multiplier",
            "embedding_multiplier",
            "residual_multiplier",
            "attn_scale",
            "attn_temperature_tuning",
            "floor_scale",
            "swiglu_alpha",
            "swiglu_limit",
            "scale_emb",
            "dim_model_base",
            "scale_depth",
        ),
        "a scalar scale, cap or clamp of activations (no parameter; element-wise)",
    ),
}

#: Problems found while translating: (field, message, fix or None).
Problem = tuple[str, str, "str | None"]


class ClassDefault(str):
    """A ``derived`` note of a field the file leaves out that a constant of the Hugging Face
    class fills (DeepSeek-V2-Lite's ``q_lora_rank`` 1536): ``import-hf`` says each one. A
    computed default (``head_dim`` from ``hidden_size / num_attention_heads``) follows from
    the file's own fields and stays a note."""

    __slots__ = ()


class NamedAfter(str):
    """A ``derived`` note of where an imported config.json's model name came from (its
    ``_name_or_path``, its folder, its ``model_type``): ``import-hf`` says it."""

    __slots__ = ()


class NotImported(str):
    """A ``derived`` note of what a config.json describes that the import leaves out, and why
    (Qwen3.5's MTP layer): ``import-hf`` says each one, as it says a :class:`ClassDefault`."""

    __slots__ = ()


class IgnoredField(str):
    """A ``derived`` note of a field a config.json holds that the Hugging Face class of its
    ``model_type`` ignores (a DeepSeek-only ``n_shared_experts`` in a ``qwen3_moe`` file):
    dropped, as transformers drops it, and said as a warning wherever the model is loaded."""

    __slots__ = ()


@dataclass(frozen=True)
class Default:
    """The value an absent field takes, and why (the text goes into ``derived``).

    Either ``value`` is the constant, or ``rule`` computes it from the other fields;
    ``needs`` names the fields the rule reads (the rule is skipped, and the field
    reported missing, when one of them is absent or invalid).
    """

    why: str
    value: Any = None
    rule: Callable[[Mapping[str, Any]], Any] | None = None
    needs: tuple[str, ...] = ()
    #: whether ``import-hf`` says the value it filled on stderr (:class:`ClassDefault`):
    #: None, a constant's yes (what the class's constructor gives a key the file leaves
    #: out) and a rule's no (it follows from the file's own fields); False for a constant
    #: the architecture fixes with no key of the class's (Qwen2's q/k/v biases)
    warn: bool | None = None

    @property
    def says(self) -> bool:
        """Whether the note of the value filled is a :class:`ClassDefault`."""
        return self.rule is None if self.warn is None else self.warn

    def resolve(self, values: Mapping[str, Any]) -> Any:
        """The default for these (already validated) values."""
        return self.rule(values) if self.rule is not None else self.value


@dataclass(frozen=True)
class HFInput:
    """A ``config.json`` key that is not a schema field but that the translation reads.

    ``kind`` is ``"boolean"``, ``"string"`` or ``"mapping"``; a value of another type is
    an error naming the key (``null`` reads as absent). ``refuse_when`` is a value
    whose presence the family refuses, with ``refuse_why`` as the message and ``refuse_fix``
    as what to do.
    """

    kind: str
    meaning: str
    refuse_when: Any = None
    refuse_why: str = ""
    refuse_fix: str | None = None


#: The fields of DeepSeek's MoE layout (``DeepseekV3Config``'s names: the routed and shared
#: experts, the dense layers first, the MoE layers' frequency and offset, the routing method)
#: that a family whose Hugging Face class counts its experts otherwise does not read: its
#: ``stray`` fields (:attr:`Family.stray`), most with ``moe_intermediate_size`` too
#: (:data:`DEEPSEEK_MOE_WIDTH_FIELDS`)
DEEPSEEK_MOE_FIELDS: tuple[str, ...] = (
    "n_routed_experts",
    "n_shared_experts",
    "first_k_dense_replace",
    "moe_layer_freq",
    "moe_layer_offset",
    "topk_method",
)

#: :data:`DEEPSEEK_MOE_FIELDS` and the experts' own width, for a family whose class sizes its
#: experts by ``intermediate_size`` (or has none)
DEEPSEEK_MOE_WIDTH_FIELDS: tuple[str, ...] = (*DEEPSEEK_MOE_FIELDS, "moe_intermediate_size")


@dataclass(frozen=True)
class Family:
    """One model family: its ``model_type`` values and how to read their configurations.

    Attributes
    ----------
    name
        Short name of the unit (``"llama"``).
    model_types
        The Hugging Face ``model_type`` values it covers (the names YAML files use).
    layout
        Parameter layout the counting code follows: one of :data:`LAYOUTS`.
    hf_class
        The Hugging Face configuration class whose defaults ``defaults`` follows
        (per model_type when they differ: see ``defaults_by_type``).
    aliases
        Other ``model_type`` spellings that mean a covered one
        (``{"RefinedWebModel": "falcon"}``).
    renames
        ``config.json`` key -> schema field, for keys this family spells differently.
    alias_wins
        model_type -> the rename keys its class lists in its ``attribute_map``: transformers
        sets the canonical field from such a key after the class's own spelling, so its value
        wins over every other spelling (MixtralConfig: ``num_experts`` over
        ``num_local_experts``).
    defaults
        Schema field -> :class:`Default`, applied to YAML files and ``config.json``
        alike when the field is absent.
    defaults_by_type
        model_type -> further defaults that override ``defaults`` for that type.
    required
        Schema fields a file of this family must state beyond the common ones.
    inputs
        ``config.json`` keys the translation reads that are not schema fields.
    ignored
        Schema fields this family's ``config.json`` holds but the architecture does
        not use (dropped on import, with the reason in ``derived``).
    reads
        Further ``config.json`` keys the ``translate`` hook reads (neither schema fields nor
        ``inputs``): known keys, never taken for a misspelling of a field.
    irrelevant
        Fields the family's Hugging Face class reads that change no parameter, cache byte or
        FLOP mlacalc counts, each with the reason (``{"scale_emb": "scales activations"}``),
        beyond the ones most classes share (:data:`COUNT_FREE`). **No field is ignored**:
        every field the class reads (its annotated fields and its ``attribute_map``, and
        those of its ``text_config`` class for a multimodal wrapper; for remote code, the
        keys of the vendored configs of its types) must be a schema field, a rename, an
        input, a read, an ``ignored`` field, or be listed here or in :data:`COUNT_FREE`;
        ``tests/test_models_fields_read.py`` fails on any other, for every registered
        family. A field that changes a count and is not modelled is refused by the
        translation (an ``inputs`` entry with ``refuse_when``, or a problem from the hook),
        never listed here. A value of a listed field that is not a finite number (JSON
        ``Infinity``, ``NaN``) loads with a note; anywhere else it is refused.
    translate
        Optional hook ``translate(data, raw, derived, problems)`` for rules a table
        cannot say (Falcon's ``multi_query``): ``data`` is the config.json mapping,
        ``raw`` the schema fields read so far (edit it in place), ``derived`` the
        notes list, ``problems`` the list of (field, message, fix) to report.
    moe
        Whether the layout may carry routed experts.
    requires_experts
        Whether every model of the family has routed experts (Mixtral).
    mtp
        Whether multi-token-prediction modules are modelled for it.
    rope
        Whether attention uses rotary embeddings (their widths must be even).
    mla
        Whether the architecture's attention is MLA (its files must state the MLA widths).
    linear
        Whether the architecture has linear-attention layers (its files must state the
        ``linear_*`` widths; no other family may).
    fused_qkv
        Whether one projection yields the queries, keys and values (GPT-2's ``c_attn``,
        Falcon's ``query_key_value``): one tensor, whose query rows split evenly over
        tensor-parallel ranks and whose K/V rows go by whole K/V heads (each rank
        ``ceil(n_kv / tp)`` of them, duplicated where ranks outnumber them).
    layer_norm
        Whether its norms are LayerNorms with a bias (a weight and a bias: ``2 x`` the width
        a norm, a mean and a reciprocal deviation saved) rather than RMSNorms (a weight).
    gated_mlp
        Whether its dense MLP is gated (gate, up and down) rather than up and down only.
    archs
        model_type -> what it adds to its base layout, layer by layer (an
        :class:`~mlacalc.models.architecture.Arch`: the cost rules of its reference
        implementation); a type without one follows its layout's base rules.
    stray
        Schema fields (of the MoE's structure) the family's Hugging Face class does not read
        under the schema's name (``n_routed_experts`` where the class reads ``num_experts``):
        a config.json key of that name is dropped with an :class:`IgnoredField` note, as
        transformers ignores it, instead of changing the counts. A family without MoE layers
        drops every such field but ``n_routed_experts``, which it refuses.
        ``tests/test_models_stray_fields.py`` checks both lists against transformers.
    stray_by_type
        model_type -> further ``stray`` fields for that type (Qwen3's dense type), and the
        family's spellings of them its class does not read either (``num_experts``, which
        ``Qwen3MoeConfig`` reads and ``Qwen3Config`` does not).
    """

    name: str
    model_types: tuple[str, ...]
    layout: str
    hf_class: str
    aliases: Mapping[str, str] = field(default_factory=dict)
    renames: Mapping[str, str] = field(default_factory=dict)
    alias_wins: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    defaults: Mapping[str, Default] = field(default_factory=dict)
    defaults_by_type: Mapping[str, Mapping[str, Default]] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    inputs: Mapping[str, HFInput] = field(default_factory=dict)
    ignored: Mapping[str, str] = field(default_factory=dict)
    reads: tuple[str, ...] = ()
    irrelevant: Mapping[str, str] = field(default_factory=dict)
    translate: Callable[..., None] | None = None
    moe: bool = False
    requires_experts: bool = False
    mtp: bool = False
    rope: bool = True
    mla: bool = False
    linear: bool = False
    fused_qkv: bool = False
    layer_norm: bool = False
    gated_mlp: bool = True
    archs: Mapping[str, Any] = field(default_factory=dict)
    stray: tuple[str, ...] = ()
    stray_by_type: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def stray_for(self, model_type: str) -> tuple[str, ...]:
        """The ``stray`` fields of ``model_type`` (the family's and the type's own)."""
        return (*self.stray, *self.stray_by_type.get(model_type, ()))

    def class_name(self, model_type: str) -> str:
        """The Hugging Face configuration class of ``model_type``, from ``hf_class``
        (``Qwen3MoeConfig`` of ``"transformers Qwen3Config / Qwen3MoeConfig"``)."""
        names = self.hf_class.removeprefix("transformers ").split(" (")[0].split(" / ")
        if len(names) == len(self.model_types) and model_type in self.model_types:
            return names[self.model_types.index(model_type)]
        return names[0]

    def defaults_for(self, model_type: str) -> dict[str, Default]:
        """Every default rule that applies to ``model_type``. A family-wide rule whose reason
        names one of the family's classes names ``model_type``'s own (a qwen3_5_moe_text file's
        default is Qwen3_5MoeTextConfig's, which the family states equal)."""
        own = self.class_name(model_type)
        classes = {self.class_name(t) for t in self.model_types} - {own}
        out = {}
        for key, rule in self.defaults.items():
            named = [c for c in classes if re.search(rf"\b{re.escape(c)}\b", rule.why)]
            if len(named) == 1 and not re.search(rf"\b{re.escape(own)}\b", rule.why):
                rule = replace(rule, why=re.sub(rf"\b{re.escape(named[0])}\b", own, rule.why))
            out[key] = rule
        out.update(self.defaults_by_type.get(model_type, {}))
        return out


_FAMILIES: dict[str, Family] = {}
_BY_TYPE: dict[str, Family] = {}
_ALIASES: dict[str, str] = {}


def register(family: Family) -> Family:
    """Add a family unit to the registry (each family module calls this once)."""
    if family.layout not in LAYOUTS:
        raise ValueError(f"family {family.name}: layout {family.layout!r} is not one of {LAYOUTS}")
    for model_type in family.model_types:
        other = _BY_TYPE.get(model_type)
        if other is not None and other.name != family.name:
            raise ValueError(
                f"model_type {model_type!r} is registered by {other.name} and {family.name}"
            )
        _BY_TYPE[model_type] = family
    for alias, target in family.aliases.items():
        if target not in family.model_types:
            raise ValueError(
                f"family {family.name}: alias {alias!r} names {target!r}, which it does not cover"
            )
        _ALIASES[alias] = target
    _FAMILIES[family.name] = family
    return family


def families() -> dict[str, Family]:
    """Every registered family unit, by unit name."""
    return dict(_FAMILIES)


def model_types() -> list[str]:
    """Every ``model_type`` a YAML file may name, in registration order of the units."""
    return list(_BY_TYPE)


def resolve_model_type(model_type: str) -> str:
    """The covered model_type that ``model_type`` (possibly an alias) means; itself if unknown."""
    return _ALIASES.get(model_type, model_type)


def family_of(model_type: str) -> Family | None:
    """The family unit covering ``model_type``, or None when no unit does."""
    return _BY_TYPE.get(_ALIASES.get(model_type, model_type))


#: model types known to exist but not modelled yet, with what is missing: a file of one is
#: refused with this reason instead of a look-alike name (deepseek_v4 is not deepseek_v3)
NOT_MODELLED: Mapping[str, str] = {
    "kimi_k3": "its text model is Kimi Linear with a latent MoE (routed experts on a "
    "routed_expert_hidden_size projection of the hidden state), attention residuals "
    "(attn_res_block_size) and output-gated MLA (mla_use_output_gate), which no transformers "
    "class implements and whose modelling code is not published with the config; kimi_linear "
    "would count another model",
}


def nearest_model_type(model_type: str) -> str | None:
    """The supported model_type closest in spelling to an unknown one."""
    known = list(_BY_TYPE) + list(_ALIASES)
    close = get_close_matches(model_type.lower().replace("-", "_"), known, n=1, cutoff=0.5)
    return resolve_model_type(close[0]) if close else None
