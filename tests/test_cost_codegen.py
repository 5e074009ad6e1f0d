"""The committed numeric code is exactly what the symbolic formulas generate."""

import subprocess
import sys

from mlacalc.cost.formulas import codegen


def test_generated_module_is_up_to_date():
    committed = codegen.TARGET.read_text(encoding="utf-8")
    assert committed == codegen.render(), "run: python -m mlacalc.cost.formulas.codegen"


def test_numeric_path_does_not_import_sympy_or_numpy():
    code = (
        "import sys, mlacalc; m = mlacalc.load_model('deepseek-v3'); mlacalc.param_counts(m); "
        "mlacalc.kv_cache_bytes(m, 131072, 8); mlacalc.attention_cost(m, 'decode', 131072, 8); "
        "mlacalc.attention_cost(m, 'prefill', 4096); "
        "print('sympy' in sys.modules, 'numpy' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "False"]


def test_summed_flops_function_equals_sum_of_ops():
    import mlacalc
    from mlacalc.cost import _generated as gen

    for name in ("deepseek-v3", "deepseek-v2-lite", "llama-3-8b"):
        model = mlacalc.load_model(name)
        for impl in (
            ("naive", "compressed", "absorbed", "absorbed_merged")
            if model.is_mla
            else ("standard",)
        ):
            cost = mlacalc.attention_cost(
                model, "chunk", 5000, batch=3, q_len=70, impl=None if impl == "standard" else impl
            )
            fns = gen.LAYERS[mlacalc.cost.engine.model_layer_key(model, impl)]
            values = dict(
                mlacalc.cost.engine.model_dims(model),
                B=3,
                q=70,
                S=5000,
                P=70 * 5000,
                b=2,
                b_w=1,
                b_a=2,
            )
            summed = mlacalc.cost.engine.evaluate(fns.matmul_flops, values)
            assert summed * model.num_hidden_layers == cost.flops
            ops = mlacalc.cost.engine.evaluate(fns.ops, values)
            assert summed == sum(op.flops for op in ops if op.kind == "matmul")


def test_a_missing_symbol_is_a_loud_error():
    import pytest

    import mlacalc
    from mlacalc.cost import _generated as gen
    from mlacalc.words.errors import FormulaBindingError

    fns = gen.LAYERS["mla_absorbed_qlora"]
    dims = mlacalc.cost.engine.model_dims(mlacalc.load_model("deepseek-v3"))
    assert mlacalc.cost.engine.evaluate(fns.kv_row_elements, dims) == 576
    del dims["d_rope"]
    with pytest.raises(FormulaBindingError, match="d_rope"):
        mlacalc.cost.engine.evaluate(fns.kv_row_elements, dims)
    assert isinstance(FormulaBindingError("x", "f"), mlacalc.MlacalcError)


def test_generated_ops_are_named_records():
    from mlacalc.cost import _generated as gen

    fns = gen.LAYERS["mha"]
    values = dict.fromkeys(fns.ops.args, 2)
    ops = gen.LAYERS["mha"].ops.fn(*[values[a] for a in fns.ops.args])
    assert all(isinstance(op, gen.OpTerms) for op in ops)
    assert [op.name for op in ops][:2] == ["q_proj", "kv_proj"] and ops[0].shape[0] == 1


def test_matmul_shapes_give_the_flops():
    """2 G M N K of each matmul's shape equals its FLOPs when every pair is computed (P = q S)."""
    import sympy as sp

    from mlacalc.cost import symbols as s

    for layer in codegen.layers():
        for op in layer.ops:
            if op.kind == "matmul":
                G, M, N, K = op.shape
                assert sp.simplify(2 * G * M * N * K - op.flops.subs(s.P, s.q * s.S)) == 0, (
                    layer.key,
                    op.name,
                )
