"""search's JSON is byte-identical run to run but for ``seconds`` (its wall time, a trial
found the one key that differed): ``to_dict(wall_time=False)`` / ``--no-wall-time`` leaves it
out; by default the key stays (schema mlacalc.search/1 keeps its keys)."""

from __future__ import annotations

import dataclasses
import json

import mlacalc

ARGS = ["search", "llama-3.1-8b", "-H", "H100-SXM", "--gpus", "1,", "--isl", 1000, "--osl", 100]


def test_to_dict_leaves_the_wall_time_out_when_asked():
    s = mlacalc.search("llama-3.1-8b", "H100-SXM", [1], isl=1000, osl=100)
    assert "seconds" in s.to_dict()
    other = dataclasses.replace(s, seconds=s.seconds + 1.0)  # another run's wall time
    assert other.to_dict() != s.to_dict()
    assert other.to_dict(wall_time=False) == s.to_dict(wall_time=False)
    assert "seconds" not in s.to_dict(wall_time=False)


def test_the_cli_json_is_byte_identical_without_the_wall_time(run):
    one = run(*ARGS, "--format", "json", "--no-wall-time")[0]
    two = run(*ARGS, "--format", "json", "--no-wall-time")[0]
    assert one == two and "seconds" not in json.loads(one)
    assert "seconds" in json.loads(run(*ARGS, "--format", "json")[0])
