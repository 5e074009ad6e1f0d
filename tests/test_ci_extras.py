"""CI's record of the test files that ask for an optional module (.ci/ci_extras.py): the core
pass without extras runs exactly those files, so a file that asks must be on the record."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _plugin():
    spec = importlib.util.spec_from_file_location("ci_extras", ROOT / ".ci" / "ci_extras.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_modules_that_import_an_extra_at_their_top_are_asked_for_too():
    names = _plugin().optional_names()
    assert {"torch", "pyarrow", "scipy", "streamlit", "plotly", "selenium"} <= names
    # the microbenchmark, the app's views, the tests' transformers helpers (hf_reference_2
    # imports hf_reference's torch at its top)
    assert {"mlacalc.bench.runner", "appviews.planner", "hf_reference", "hf_reference_2"} <= names
    # the core and the tests' table helper (which asks for pyarrow inside its function) are not
    assert not {"mlacalc", "mlacalc.cli", "mlacalc.measured.tables", "mapped_rows"} & names


def test_a_run_records_each_file_that_asks_and_a_run_of_the_record_deselects_the_rest(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_asks.py").write_text(
        "import importlib.util\n\n\ndef test_a():\n    importlib.util.find_spec('scipy')\n"
    )
    (tmp_path / "test_at_import.py").write_text(
        "import importlib.util\n\nimportlib.util.find_spec('torch')\n\n\ndef test_b():\n    pass\n"
    )
    (tmp_path / "test_quiet.py").write_text("def test_c():\n    import json  # noqa: F401\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / ".ci"), "PYTEST_PLUGINS": "ci_extras"}
    env.pop("MLACALC_EXTRAS_FILES", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    log = tmp_path / "log"
    record = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True,
                            env={**env, "MLACALC_EXTRAS_LOG": str(log)})  # fmt: skip
    assert record.returncode == 0, record.stdout + record.stderr
    files = sorted(line for f in log.iterdir() for line in f.read_text().split())
    assert files == ["test_asks.py", "test_at_import.py"]
    listed = tmp_path / "listed.txt"
    listed.write_text("\n".join(files) + "\n")
    env.pop("MLACALC_EXTRAS_LOG", None)
    only = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True,
                          env={**env, "MLACALC_EXTRAS_FILES": str(listed)})  # fmt: skip
    assert only.returncode == 0 and "2 passed, 1 deselected" in only.stdout, only.stdout


def test_the_core_pass_also_runs_the_files_the_record_cannot_see_into(tmp_path):
    # a test running mlacalc in a subprocess asks there, and one reaching an extra through the
    # tests' cached mapped_rows tables or hf_reference models asks in another file's test: the
    # record missed both, so the core pass never ran them without the extras
    tests = tmp_path / "tests"
    tests.mkdir()
    files = {
        "test_spawn.py": "import subprocess\n",
        "test_console.py": "import sys\n\ncmd = [sys.executable, '-m', 'mlacalc']\n",
        "test_tables.py": "def test_t():\n    from mapped_rows import mapped\n",
        "test_hf.py": "import pytest\n\nref = pytest.importorskip('hf_reference_2')\n",
        "test_quiet.py": "import json\n\n# mapped_rows_of is no import\n",
        "helper.py": "import subprocess\n",  # no test file
    }
    for name, text in files.items():
        (tests / name).write_text(text)
    plugin = _plugin()
    want = [
        "tests/test_console.py",
        "tests/test_hf.py",
        "tests/test_spawn.py",
        "tests/test_tables.py",
    ]
    assert plugin.unseen_files(tmp_path) == want
    run = subprocess.run([sys.executable, str(ROOT / ".ci" / "ci_extras.py"), "--unseen",
                          str(tmp_path)], capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0 and run.stdout.split() == want, run.stderr
    # the repository's own: the CLI's subprocess tests and the table tests among them
    ours = plugin.unseen_files(ROOT)
    assert {"tests/test_cli.py", "tests/test_measured_dsv4_modules.py"} <= set(ours)
    assert "--unseen" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
