"""CI's pytest plugin: which test files reach an optional extra, and a run of only those.

``.ci/run`` loads it with ``PYTEST_PLUGINS=ci_extras`` and this folder on ``PYTHONPATH`` (the
README's test command itself is unchanged); it does nothing unless one of two variables is set.

``MLACALC_EXTRAS_LOG=DIR`` (the suite with every extra): each test file whose collection or
tests ask for an optional module is written to ``DIR/<pid>.txt``, one path a line, as soon as it
first asks. Asking is an ``import`` statement (run each time, also of a module already loaded),
``importlib.import_module``, ``importlib.util.find_spec`` or ``pytest.importorskip`` of an
optional extra's module, or of a module of the repository that imports one at its top (the
microbenchmark's modules, the app's views, the tests' transformers helpers). A test that asks
for none runs the same code with or without the extras: it is not run again without them.

``MLACALC_EXTRAS_FILES=FILE`` (the core pass, without extras): every file is still collected
(an import error anywhere fails the run), and only the tests of the files listed in FILE run;
the others are deselected.

What the record cannot see: a test that reaches an extra only through an object another file's
test built and cached (a session fixture of conftest.py, a ``functools.cache`` helper such as
the tests' ``mapped_rows`` tables or ``hf_reference`` models) is not listed for it, and a test
that runs ``mlacalc`` in a subprocess asks in that process, which the plugin does not see. So
``.ci/run``'s core pass also runs every file :func:`unseen_files` lists (``python
.ci/ci_extras.py --unseen REPO`` prints them): each test file that spawns a subprocess
(``subprocess`` or ``sys.executable`` in its text) or imports ``mapped_rows`` or an
``hf_reference`` module (an ``import`` or ``pytest.importorskip``), appended to the record's list.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import os
import re
from pathlib import Path

import pytest

#: the optional extras' top-level modules (pyproject.toml's extras)
OPTIONAL = ("torch", "transformers", "pyarrow", "pandas", "scipy", "threadpoolctl",
            "streamlit", "plotly", "selenium")  # fmt: skip

_ROOT = Path(__file__).resolve().parent.parent
_TOP = re.compile(r"^(?:import|from)\s+([A-Za-z_][\w.]*)", re.MULTILINE)


#: a test file the record cannot see into: one that spawns a subprocess, or imports the tests'
#: cached table or transformers helpers (:func:`unseen_files`)
_UNSEEN = re.compile(
    r"subprocess|sys\.executable"
    r"|(?:^\s*(?:from|import)\s+|importorskip\(\s*[\"'])(?:mapped_rows|hf_reference\w*)\b",
    re.MULTILINE,
)


def unseen_files(root: Path) -> list[str]:
    """The test files under ``root/tests`` (paths relative to ``root``, as the record writes
    them) that spawn a subprocess or import ``mapped_rows`` / an ``hf_reference`` module: the
    record cannot see what they ask for, so the core pass runs them as well."""
    return sorted(
        path.relative_to(root).as_posix()
        for path in root.glob("tests/**/test_*.py")
        if _UNSEEN.search(path.read_text(encoding="utf-8", errors="replace"))
    )


def _module_name(path: Path) -> str:
    rel = path.relative_to(_ROOT).with_suffix("")
    parts = rel.parts[1:] if rel.parts[0] == "tests" else rel.parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _asks(name: str, wanted: frozenset[str]) -> bool:
    """Whether ``name`` is one of ``wanted`` or inside one (a set lookup a dotted prefix)."""
    while name not in wanted:
        name, dot, _ = name.rpartition(".")
        if not dot:
            return False
    return True


def optional_names() -> frozenset[str]:
    """The optional extras' modules and every module of the repository (the package, the app,
    the tests' helper modules) that imports one of them, or one of those, at its top."""
    files = [*_ROOT.glob("mlacalc/**/*.py"), *_ROOT.glob("appviews/*.py"), _ROOT / "app.py",
             *_ROOT.glob("tests/[!t]*.py")]  # fmt: skip
    tops = {}
    for path in files:
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            tops[_module_name(path)] = set(_TOP.findall(text))
    wanted = set(OPTIONAL)
    while True:
        more = {m for m, names in tops.items() if m not in wanted and any(
            _asks(n, frozenset(wanted)) for n in names)}  # fmt: skip
        if not more:
            return frozenset(wanted)
        wanted |= more


class _Recorder:
    def __init__(self, folder: Path, root: Path):
        self.out = folder / f"{os.getpid()}.txt"
        self.root = root
        self.wanted = optional_names()
        self.current: str | None = None
        self.seen: set[str] = set()

    def ask(self, name: str) -> None:
        if self.current is None or self.current in self.seen or not _asks(name, self.wanted):
            return
        self.seen.add(self.current)
        with self.out.open("a", encoding="utf-8") as f:
            f.write(self.current + "\n")

    def at(self, path: Path | None) -> None:
        try:
            self.current = None if path is None else path.relative_to(self.root).as_posix()
        except ValueError:
            self.current = None

    def install(self) -> None:
        real_import, real_module, real_spec = (
            builtins.__import__,
            importlib.import_module,
            importlib.util.find_spec,
        )

        def _import(name, globals=None, locals=None, fromlist=(), level=0):
            if self.current is not None:
                full = name
                if level and globals:
                    base = (globals.get("__package__") or "").rsplit(".", level - 1)[0]
                    full = f"{base}.{name}" if name else base
                self.ask(full)
                for sub in fromlist or ():
                    self.ask(f"{full}.{sub}")
            return real_import(name, globals, locals, fromlist, level)

        def _module(name, package=None):
            if self.current is not None and not name.startswith("."):
                self.ask(name)
            return real_module(name, package)

        def _spec(name, package=None):
            if self.current is not None and not name.startswith("."):
                self.ask(name)
            return real_spec(name, package)

        builtins.__import__ = _import
        importlib.import_module = _module
        importlib.util.find_spec = _spec


def pytest_configure(config: pytest.Config) -> None:
    log = os.environ.get("MLACALC_EXTRAS_LOG")
    if log:
        Path(log).mkdir(parents=True, exist_ok=True)
        recorder = _Recorder(Path(log), config.rootpath)
        recorder.install()
        config.pluginmanager.register(_RecordHooks(recorder), "ci_extras_record")


class _RecordHooks:
    def __init__(self, recorder: _Recorder):
        self.recorder = recorder

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector):
        if isinstance(collector, pytest.Module):
            self.recorder.at(collector.path)
        try:
            return (yield)
        finally:
            self.recorder.at(None)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item):
        self.recorder.at(item.path)
        try:
            return (yield)
        finally:
            self.recorder.at(None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    listed = os.environ.get("MLACALC_EXTRAS_FILES")
    if not listed:
        return
    keep_files = set(Path(listed).read_text(encoding="utf-8").split())
    keep, drop = [], []
    for item in items:
        rel = item.path.relative_to(config.rootpath).as_posix()
        (keep if rel in keep_files else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


if __name__ == "__main__":  # python .ci/ci_extras.py --unseen REPO: unseen_files, one a line
    import sys

    if len(sys.argv) != 3 or sys.argv[1] != "--unseen":
        sys.exit("usage: python .ci/ci_extras.py --unseen REPO")
    print("\n".join(unseen_files(Path(sys.argv[2]).resolve())))
