"""``--set kv_lora_rank=null`` on an MLA model: a trial got one long line listing four MLA
fields and head_dim, and nothing on how to see the model as GQA; now one short line naming
``compare MODEL --as-variants``."""

import pytest

import mlacalc


def test_nulling_the_latent_points_at_the_variants(run):
    _, err = run("report", "deepseek-v3", "--set", "kv_lora_rank=null", code=2)
    assert err.count("\n") == 1 and len(err) < 240, err
    assert "is an MLA field" not in err and "head_dim" not in err, err
    assert "half MLA" in err and "mlacalc compare deepseek-v3 --as-variants" in err, err
    assert err.count("(") == 1, err  # one sentence: only the command's --help pointer
    out, _ = run("compare", "deepseek-v3", "--as-variants", "--format", "json")
    assert "GQA" in out  # the command it names shows the model as GQA
    with pytest.raises(mlacalc.ConfigError, match="half MLA"):
        mlacalc.load_model("deepseek-v3").with_changes(kv_lora_rank=None)
