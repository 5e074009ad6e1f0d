"""A config.json field the Hugging Face class of its model_type ignores changes no count.

A trial's ``qwen3_moe`` design file carried DeepSeek's ``n_routed_experts: 160``,
``n_shared_experts: 1`` and ``first_k_dense_replace: 2``: mlacalc read them (179.49 G
parameters) where transformers' ``Qwen3MoeConfig`` ignores them (149.33 G: its default 128
experts, no shared expert, every layer MoE). Each family now drops the fields its class does
not read (:attr:`Family.stray`), with a warning naming the field and what to write instead.
"""

from __future__ import annotations

import json
import warnings

import pytest
from reference_data import TESTS

from mlacalc import import_hf_config
from mlacalc.cli import main
from mlacalc.cost.params import param_counts
from mlacalc.models.hf import families
from mlacalc.models.hf._translate import _MOE_STRUCTURE, stray_fields
from mlacalc.words.errors import ConfigError, MlacalcWarning

TRIAL = TESTS / "data" / "trial"


def _trial(name: str) -> dict:
    return json.loads((TRIAL / f"{name}.json").read_text(encoding="utf-8"))


def _load(data: dict):
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        model = import_hf_config(data, "config.json")
    return model, [str(w.message) for w in said if issubclass(w.category, MlacalcWarning)]


#: (trial file, parameters transformers builds on the meta device: checked below)
TRIAL_COUNTS = [
    ("gqa8", 149_330_838_528),
    ("qwen_shared", 1_254_542_336),
    ("mixtral_stray", 1_254_082_560),
]


@pytest.mark.parametrize(("name", "hf_total"), TRIAL_COUNTS)
def test_trial_files_count_what_transformers_builds(name, hf_total):
    model, _ = _load(_trial(name))
    assert param_counts(model).total == hf_total


def test_the_class_field_wins_over_the_stray_one():
    data = {**_trial("gqa8"), "num_experts": 96}
    model, _ = _load(data)
    assert model.n_routed_experts == 96  # num_experts, not the file's n_routed_experts 160
    assert model.n_shared_experts == 0 and model.first_k_dense_replace == 0


def test_each_stray_field_is_warned_once_naming_it_and_the_fix():
    _, said = _load(_trial("gqa8"))
    assert any(
        "n_routed_experts = 160 ignored, as transformers' Qwen3MoeConfig ignores it: "
        "use num_experts" in s
        for s in said
    )
    shared = [s for s in said if "n_shared_experts = 1 ignored" in s]
    assert len(shared) == 1 and "Qwen3MoeConfig has no such field: remove it" in shared[0]
    _, said = _load(_trial("mixtral_stray"))
    assert sum("ignored, as transformers' MixtralConfig" in s for s in said) == 2
    _, said = _load({**_trial("qwen_shared"), "n_shared_experts": None})
    assert not any("ignored" in s for s in said)  # null: nothing to ignore


def test_a_dense_type_ignores_the_experts_its_moe_sibling_reads():
    """qwen3 (Qwen3Config) reads no num_experts: a file with one counted a MoE (and, once its
    expert widths were dropped, was refused for missing them); transformers builds it dense."""
    data = {**_trial("qwen_shared"), "model_type": "qwen3"}
    data.pop("n_shared_experts")
    model, said = _load(data)
    assert not model.n_routed_experts and param_counts(model).total == 197_053_440
    assert any("num_experts = 64 ignored, as transformers' Qwen3Config" in s for s in said)


def test_a_stray_field_in_text_config_is_dropped_too():
    base = _trial("qwen_shared")
    inner = {**base, "model_type": "qwen3_vl_moe_text"}
    data = {"model_type": "qwen3_vl_moe", "text_config": inner}
    model, said = _load(data)
    assert model.n_shared_experts == 0
    assert any("text_config.n_shared_experts = 2 ignored" in s for s in said)


def test_a_dense_family_still_refuses_routed_experts_and_ignores_the_rest():
    data = {k: v for k, v in _trial("mixtral_stray").items() if k != "num_local_experts"}
    data["model_type"] = "llama"
    model, said = _load(data)  # n_shared_experts, first_k_dense_replace: ignored
    assert model.n_routed_experts is None or model.n_routed_experts == 0
    assert any("LlamaConfig has no such field" in s for s in said)
    with pytest.raises(ConfigError, match="model_type llama has no MoE layers"):
        import_hf_config({**data, "n_routed_experts": 160}, "config.json")


def test_experts_in_a_dense_family_are_the_one_problem(tmp_path, capsys):
    """A llama file with n_routed_experts and moe_intermediate_size: the experts are the
    problem, not the expert fields a dense class drops (they had read 'is missing')."""
    data = {k: v for k, v in _trial("mixtral_stray").items() if k != "num_local_experts"}
    data.update(model_type="llama", n_routed_experts=8, moe_intermediate_size=2048)
    data.pop("num_experts_per_tok", None)
    with pytest.raises(ConfigError) as info:
        import_hf_config(data, "config.json")
    assert [p[0] for p in info.value.problems] == ["n_routed_experts"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert "is missing" not in err and err.count("\n") == 1, err
    assert "model_type llama has no MoE layers" in err


def test_the_command_line_warns_and_counts_what_transformers_builds(capsys):
    assert main(["report", str(TRIAL / "gqa8.json"), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["parameters"]["total"] == 149_330_838_528
    lines = [line for line in err.splitlines() if "ignored, as transformers'" in line]
    assert len(lines) == 5 and all(line.startswith("mlacalc: warning: gqa8: ") for line in lines)


# -- against transformers: the lists, and the trial files built on the meta device ----------


def _class_reads(model_type: str) -> set[str] | None:
    """Every field ``model_type``'s class reads, and every key its vendored files hold."""
    from test_models_fields_read import _fields_read, _vendored_keys

    found = _fields_read(model_type)
    if found is None:
        return None
    return found[1] | (_vendored_keys(model_type) or set())


#: types whose family reads a spelling of the experts' count their class does not (DeepSeek's
#: num_experts, num_local_experts): kept, as n_routed_experts is required of them all the same
_SPELLINGS_KEPT = ("deepseek_v2", "deepseek_v3", "kimi_k2", "minimax_m3")


def test_each_family_ignores_exactly_the_fields_its_class_does_not_read():
    pytest.importorskip("transformers")
    wrong = []
    for unit in families().values():
        for model_type in unit.model_types:
            reads = _class_reads(model_type)
            if reads is None:
                continue
            want = [f for f in _MOE_STRUCTURE if f not in reads]
            if not unit.moe:
                want = [f for f in want if f != "n_routed_experts"]  # refused instead
            if model_type not in _SPELLINGS_KEPT:  # the family's spellings the class ignores
                moe = _MOE_STRUCTURE
                want += [k for k, v in unit.renames.items() if v in moe and k not in reads]
            if sorted(want) != sorted(stray_fields(unit, model_type)):
                wrong.append(f"{model_type}: want {want}, got {stray_fields(unit, model_type)}")
            for field in stray_fields(unit, model_type):  # the spelling a warning offers
                spelled = next((k for k, v in unit.renames.items() if v == field), None)
                if field not in unit.defaults_for(model_type) and field not in unit.required:
                    spelled = None  # offered only where the type has the field
                if spelled is not None and spelled not in reads:
                    wrong.append(f"{model_type}: {field} offers {spelled}, which it does not read")
    assert not wrong, "\n".join(wrong)


def test_trial_counts_are_what_transformers_builds_on_meta():
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    for name, total in TRIAL_COUNTS:
        data = _trial(name)
        if name == "gqa8":  # its 48 layers of 128 experts take seconds: 4 show the same
            data["num_hidden_layers"] = 4
            model, _ = _load(data)
            total = param_counts(model).total
        config = transformers.CONFIG_MAPPING[data.pop("model_type")](**data)
        with torch.device("meta"):
            built = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        assert sum(p.numel() for p in built.parameters()) == total, name


@pytest.mark.parametrize(
    "model_type, field, cls",
    [
        ("qwen3_moe", "tie_word_embeddings", "Qwen3MoeConfig"),
        ("qwen3_moe", "head_dim", "Qwen3MoeConfig"),
        ("qwen3", "tie_word_embeddings", "Qwen3Config"),
        ("qwen3_5_moe_text", "head_dim", "Qwen3_5MoeTextConfig"),
    ],
)
def test_a_default_note_names_the_files_class(model_type, field, cls):
    from mlacalc.models.registry import family_of

    why = family_of(model_type).defaults_for(model_type)[field].why
    assert why.split(" ")[0].rstrip(":") == cls, why


def test_every_default_note_names_its_own_class():
    """A note naming one class of a family names the file's (a qwen3_moe file's
    tie_word_embeddings had said 'Qwen3Config default')."""
    import re

    from mlacalc.models.registry import families

    for family in families().values():
        for t in family.model_types:
            others = {family.class_name(o) for o in family.model_types} - {family.class_name(t)}
            for field, rule in family.defaults_for(t).items():
                named = set(re.findall(r"\w+Config\b", rule.why))
                assert not named or family.class_name(t) in named or not named & others, (
                    t,
                    field,
                    rule.why,
                )
