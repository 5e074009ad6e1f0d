import pytest

import mlacalc

SHIPPED = mlacalc.shipped_models()


@pytest.fixture(scope="session")
def v3():
    return mlacalc.load_model("deepseek-v3")


@pytest.fixture(autouse=True)
def _no_columns(monkeypatch):
    """Every test sees no ``$COLUMNS`` (tables at the CLI's 160 without a terminal), as in a
    plain run; pytest-xdist's workers set ``COLUMNS=80``. A test that wants a width sets it."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture(scope="module")
def torch_one_thread():
    """Tiny tensors: PyTorch on one thread for a module's tests (on a shared machine more
    threads only wait for each other); a module uses it with ``pytestmark =
    pytest.mark.usefixtures("torch_one_thread")``. Skips where torch is not installed."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


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
