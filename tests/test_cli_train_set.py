"""``train --set FIELD=VALUE``: the training step of a new design (as report, compare and plan
take it), with the same one-line errors naming --set and the field."""

import json


def _doc(run, *extra):
    out, _ = run("train", "llama-3.1-8b", "--seq-len", "4k", *extra, "--format", "json")
    return json.loads(out)


def test_train_set_kv_heads_moves_the_attention_parameters_by_hand(run):
    base = _doc(run)
    four = _doc(run, "--set", "num_key_value_heads=4")
    # Llama-3.1-8B: 32 layers, d_model 4096, head_dim 128; 8 -> 4 KV heads drops half of the
    # K and V projections: 32 x 2 x 4096 x (4 x 128) parameters
    dropped = 32 * 2 * 4096 * 4 * 128
    assert base["params_per_gpu"] - four["params_per_gpu"] == dropped == 134_217_728
    fwd = "flops_per_micro_batch"
    moved = (
        base[fwd]["forward"]["attention_projections"]
        - four[fwd]["forward"]["attention_projections"]
    )
    assert moved == 2 * 4096 * dropped  # 2 FLOPs a parameter a token, 4,096 tokens
    assert base[fwd]["forward"]["ffn"] == four[fwd]["forward"]["ffn"]


def test_train_bad_set_is_one_line_naming_the_option_and_field(run):
    _, err = run("train", "llama-3.1-8b", "--set", "num_key_value_head=4", code=2)
    assert err.count("\n") == 1 and "Invalid value for --set" in err, err
    assert "did you mean 'num_key_value_heads'?" in err, err
