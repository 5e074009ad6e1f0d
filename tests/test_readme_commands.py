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
