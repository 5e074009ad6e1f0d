"""The committed numeric code is exactly what the symbolic formulas generate."""

import subprocess
import sys

from mlacalc.formulas import codegen


def test_generated_module_is_up_to_date():
    committed = codegen.TARGET.read_text(encoding="utf-8")
    assert committed == codegen.render(), "run: python -m mlacalc.formulas.codegen"


def test_numeric_path_does_not_import_sympy_or_numpy():
    code = ("import sys, mlacalc; m = mlacalc.load_model('deepseek-v3'); mlacalc.param_counts(m); "
            "mlacalc.kv_cache_bytes(m, 131072, 8); mlacalc.attention_cost(m, 'decode', 131072, 8); "
            "mlacalc.attention_cost(m, 'prefill', 4096); "
            "print('sympy' in sys.modules, 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
