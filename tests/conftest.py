import os

# BLAS on one thread a process, set before numpy loads (its OpenBLAS reads this once): the
# fits' least-squares steps take the SVD of a tall, narrow Jacobian (1,500-12,000 rows, a few
# columns), where OpenBLAS's second thread only waits, and under pytest -n 2 each worker's
# threads contend with the other worker's for the two cores. A tall 1,500 x 8 SVD took 12 ms
# of CPU with OpenBLAS's default threads on the 2-core machine under load and 0.3 ms on one;
# test_quick_fit_on_h100_decode_rows 24.7 -> 11.5 s of CPU. A value the caller set is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """test_reference_hf.py's tests grouped by model, in place among the suite's items: each
    of its test functions sweeps every model in turn, so ``hf_reference.build``'s cache of four
    transformers models never held a model from one function to the next and each model was
    built once a function (the file took 776 s under load, 136 s of CPU). Grouped, a model's
    tests run one after another in the same worker; every test and its assertion is kept."""
    where = [i for i, item in enumerate(items) if item.path.name == "test_reference_hf.py"]

    def model(item: pytest.Item) -> str:
        params = getattr(getattr(item, "callspec", None), "params", {})
        return str(params.get("name", params.get("model_type", "")))

    for i, item in zip(where, sorted((items[i] for i in where), key=model)):
        items[i] = item
