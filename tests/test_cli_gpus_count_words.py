"""Counts of GPUs (--gpus) and of sequences (--batches) are whole numbers, not token sizes:
``--gpus 1k`` had been read as 1,024 GPUs (a search of minutes), ``--gpus 8k`` refused as "is
8.19e+03, above the bound of 4,096 (2^12)", and ``--batches 1,x`` as "'x' is not a size; write
131072, 128k or 1M" (a token size's words). Each bad part is refused naming the option, what
it counts and the fix."""

from __future__ import annotations

import click
import pytest

from mlacalc.cli.common import count_list


@pytest.mark.parametrize("bad", ["abc", "8x", "eight", "1k", "8k", "1.5", "-8"])
def test_a_gpu_list_s_bad_part_is_refused_as_a_gpu_count(run, bad):
    _, err = run("search", "llama-3-8b", "-H", "H100-SXM", "--gpus", f"8,{bad}", "--isl", 2000,
                 "--osl", 500, code=2)  # fmt: skip
    flat = " ".join(err.split())
    assert "--gpus" in flat
    assert f"'{bad}' is not a count of GPUs; write a whole number of GPUs, e.g. 8" in flat
    assert "is not a size" not in flat and "128k" not in flat


@pytest.mark.parametrize("bad", ["0", "8192"])
def test_a_gpu_count_out_of_bounds_is_refused_with_the_bound(run, bad):
    _, err = run("search", "llama-3-8b", "-H", "H100-SXM", "--gpus", bad, "--isl", 2000,
                 "--osl", 500, code=2)  # fmt: skip
    flat = " ".join(err.split())
    assert f"--gpus: '{bad}' is outside 1..4,096 GPUs; write a whole number of GPUs" in flat
    assert "8.19e+03" not in flat and "2^12" not in flat


@pytest.mark.parametrize("bad", ["x", "64k", "1M", "2.5"])
def test_a_batch_list_s_bad_part_is_refused_as_a_count_of_sequences(run, bad):
    _, err = run("search", "llama-3-8b", "-H", "H100-SXM", "--gpus", "1", "--batches", f"1,{bad}",
                 "--isl", 2000, "--osl", 500, code=2)  # fmt: skip
    flat = " ".join(err.split())
    assert f"--batches: '{bad}' is not a count of sequences; write a whole number" in flat
    assert "is not a size" not in flat and "128k" not in flat


def test_count_list_reads_whole_numbers_only():
    # a mutant that reads parts as token sizes again (SIZE.convert) takes '1k' as 1024
    assert count_list(" 1, 8 ,32,", "--gpus", "GPUs", 4096, "8,16") == [1, 8, 32]
    assert count_list("", "--gpus", "GPUs", 4096, "8,16") == []
    for bad in ("1k", "1K", "2m", "1.0", "+8", "٨", "4097"):
        with pytest.raises(click.BadParameter) as exc:
            count_list(f"8,{bad}", "--gpus", "GPUs", 4096, "8,16")
        assert exc.value.param_hint == "--gpus", bad
