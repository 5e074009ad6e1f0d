"""Every `$ mlacalc ...` command of the README's console blocks runs (exit status 0), except
those naming files a reader supplies (their own config or tables) or a GPU."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
#: commands that need what a reader brings: their own files, a CUDA device
NEEDS_THE_READER = ("path/to/", "tables/", "results/", "--device cuda")


def _commands() -> list[str]:
    out, block = [], False
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            block = line.strip() == "```console"
            continue
        if block and line.startswith("$ mlacalc "):
            command = line[len("$ mlacalc ") :].split("  #", 1)[0].strip()
            if not any(s in command for s in NEEDS_THE_READER):
                out.append(command)
    return out


COMMANDS = _commands()


def test_the_readme_has_commands_to_run():
    assert len(COMMANDS) >= 12


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_runs(run, command):
    run(*shlex.split(command))


def _python_block() -> list[str]:
    text = README.read_text(encoding="utf-8")
    return text.split("```python\n", 1)[1].split("```", 1)[0].splitlines()


def test_readme_python_example_prints_what_its_comments_say():
    """Each line of the README's Python example whose comment is a value (``# 671026419200``,
    ``# True, 4, 0.0223``) gives that value: integers and flags exactly, a decimal to the
    digits written. The comment said 0.0208 for a decode step of 0.02230 s."""
    import ast

    scope: dict = {}
    checked = 0
    for line in _python_block():
        code, _, comment = line.partition("  #")
        exec(code.strip(), scope)
        written = comment.strip().split(" (", 1)[0]
        try:
            want = ast.literal_eval(written)
        except (ValueError, SyntaxError):
            continue
        got = eval(code.strip().split("=", 1)[-1] if " = " in code else code.strip(), scope)
        want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
        for w, g in zip(want, got, strict=True):
            if isinstance(w, float):
                decimals = len(repr(w).split(".")[1])
                assert round(g, decimals) == w, (line, g)
            else:
                assert g == w, (line, g)
        checked += 1
    assert checked >= 3
