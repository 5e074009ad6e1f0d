import pytest

import mlacalc

SHIPPED = mlacalc.shipped_models()


@pytest.fixture(scope="session")
def v3():
    return mlacalc.load_model("deepseek-v3")


@pytest.fixture
def run(capsys):
    """``run("roofline", "deepseek-v3", ..., code=0)``: the CLI in process (every argument as
    text: numbers may be given as numbers), its exit status checked; returns (stdout, stderr)."""
    from mlacalc.cli import main

    def _run(*args, code=0):
        rc = main([str(a) for a in args])
        out, err = capsys.readouterr()
        assert rc == code, (out, err)
        return out, err

    return _run
