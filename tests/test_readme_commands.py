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


#: each command's exit status, stdout and stderr, run once a test process: the examples'
#: test below runs the same commands (the search example takes ~9 s of CPU)
_DONE: dict[str, tuple[int, str, str]] = {}


def _cli(capsys: pytest.CaptureFixture[str], command: str) -> tuple[int, str, str]:
    """``mlacalc COMMAND`` in process: its exit status, stdout and stderr (kept for the
    process: the CLI's output depends on its arguments alone)."""
    if command not in _DONE:
        from mlacalc.cli import main

        capsys.readouterr()
        rc = main(shlex.split(command))
        out, err = capsys.readouterr()
        _DONE[command] = (rc, out, err)
    return _DONE[command]


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_runs(capsys, command):
    rc, out, err = _cli(capsys, command)
    assert rc == 0, (out, err)


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


def _examples() -> list[tuple[str, list[tuple[int, str]]]]:
    """The console blocks whose command is followed by its output (an excerpt: the first table
    or a section): (command, [(README line number, output line), ...]), blank lines left out."""
    out: list[tuple[str, list[tuple[int, str]]]] = []
    block = False
    for number, line in enumerate(README.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            block = line.strip() == "```console"
            continue
        if not block:
            continue
        if line.startswith("$ mlacalc "):
            out.append((line[len("$ mlacalc ") :].split("  #", 1)[0].strip(), []))
        elif line.strip() and out:
            out[-1][1].append((number, line))
    return [(command, lines) for command, lines in out if lines]


EXAMPLES = _examples()


def _key(line: str) -> str:
    """What names a line whatever its figures: a table row's first cell, else its first words."""
    if line.startswith("|"):
        return line.split("|")[1].strip()
    return " ".join(line.split()[:4])


def test_the_readme_has_examples_with_output():
    # report's KV table, plan's first table, plan's serving table, search's best deployment
    assert len(EXAMPLES) >= 4


@pytest.mark.parametrize("command, lines", EXAMPLES, ids=[c[:60] for c, _ in EXAMPLES])
def test_readme_example_prints_what_the_readme_shows(capsys, command, lines):
    """Each output line the README shows is printed by its command (the serving
    example said TTFT 259.9 ms, TPOT 97.44, 2,619 tok/s where the command printed 260.2,
    97.52, 2,616, and no test ran it). A kernel rule or refit moves these figures: the failure
    lists each README line to update and what to, so the README follows in the same commit."""
    rc, printed, err = _cli(capsys, command)
    assert rc == 0, (printed, err)
    got = printed.splitlines()
    at, stale = 0, []
    for number, line in lines:
        if line in got:  # an excerpt: a note printed under another table counts too
            at = got.index(line, at) + 1 if line in got[at:] else at
            continue
        # the same row further on (its table's), else anywhere
        order = list(range(at, len(got))) + list(range(at))
        same = [i for i in order if _key(got[i]) == _key(line)]
        if same:
            at = same[0] + 1
            now = f"update to {got[same[0]]!r}"
        else:
            now = "no such line printed now"
        stale.append(f"README.md line {number}: {line!r}\n    -> {now}")
    assert not stale, f"`mlacalc {command}` prints other figures than README.md shows:\n" + (
        "\n".join(stale)
    )
