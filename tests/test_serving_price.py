"""What a plan's tokens cost at the user's GPU-hour price (``Plan.price``, ``--gpu-hour-price``).

A long-context trial compared models at 128K by turning tokens/s per GPU into dollars a million
tokens by hand. Each figure is checked here against the plan's own fields by another route (the
fleet's hour spread over what it serves an hour), the pools of a disaggregated plan against the
fleet, and every bad price against its one-line refusal, in the API and on the command line.
"""

from __future__ import annotations

import json
import math

import pytest

from mlacalc.serving.plan import plan
from mlacalc.serving.price import money, price_of
from mlacalc.words.errors import InvalidArgumentError

PRICE = 2.5  # US dollars a GPU-hour, a made-up price (none is shipped)


@pytest.fixture(scope="module")
def served():
    return plan("llama-3-8b", "H100-SXM", 2, tp=1, isl=1000, osl=200, concurrency=16)


@pytest.fixture(scope="module")
def disaggregated():
    return plan(
        "llama-3-8b", "H100-SXM", 2, tp=1, isl=2000, osl=200, concurrency=32,
        mode="disaggregated", prefill_gpus=1,
    )  # fmt: skip


def test_served_price_is_the_fleets_hour_over_what_it_serves(served):
    pr = served.price(PRICE)
    hour = PRICE * served.total_gpus  # dollars the fleet costs an hour
    out_per_hour = served.output_tokens_per_s * 3600
    requests_per_hour = out_per_hour / served.osl
    assert pr.gpus == served.total_gpus == 2
    assert pr.fleet_usd_per_hour == pytest.approx(hour, rel=1e-12)
    assert pr.usd_per_million_output_tokens == pytest.approx(hour / out_per_hour * 1e6, rel=1e-12)
    # by tokens per GPU: one GPU's hour over one GPU's tokens, the same figure
    per_gpu = PRICE / (served.output_tokens_per_s_per_gpu * 3600) * 1e6
    assert pr.usd_per_million_output_tokens == pytest.approx(per_gpu, rel=1e-12)
    assert pr.usd_per_request * requests_per_hour == pytest.approx(hour, rel=1e-12)
    tokens_per_hour = requests_per_hour * (served.isl + served.osl)
    assert pr.usd_per_million_tokens == pytest.approx(hour / tokens_per_hour * 1e6, rel=1e-12)
    assert pr.usd_per_million_input_tokens is None  # aggregated: no split of the hour
    assert "prompts' passes included" in pr.basis


def test_disaggregated_pools_add_up_to_the_fleet(disaggregated):
    p = disaggregated
    pr = p.price(PRICE)
    assert p.mode == "disaggregated" and p.prefill_gpus == 1 and pr.gpus == 3
    requests_per_hour = p.output_tokens_per_s * 3600 / p.osl
    prefill_hour = pr.usd_per_million_input_tokens * requests_per_hour * p.isl / 1e6
    decode_hour = pr.decode_pool_usd_per_million_output_tokens * p.output_tokens_per_s * 3600 / 1e6
    assert prefill_hour == pytest.approx(PRICE * p.prefill_gpus, rel=1e-12)
    assert decode_hour == pytest.approx(PRICE * p.gpus, rel=1e-12)
    assert prefill_hour + decode_hour == pytest.approx(pr.fleet_usd_per_hour, rel=1e-12)


def test_a_capacity_plan_prices_its_decode_only_steps_and_says_so():
    p = plan("llama-3-8b", "H100-SXM", 1, seq_len=4096, batch=32)
    pr = p.price(PRICE)
    assert pr.output_tokens_per_s == p.decode_tokens_per_s
    assert pr.usd_per_million_output_tokens == pytest.approx(
        PRICE / (p.decode_tokens_per_s * 3600) * 1e6, rel=1e-12
    )
    assert pr.usd_per_request is None and pr.usd_per_million_tokens is None
    assert "decode-only steps at batch 32" in pr.basis and "floor" in pr.basis


def test_a_plan_that_fits_nothing_has_no_price():
    p = plan("deepseek-v3", "H100-SXM", 1)
    assert not p.fits and p.price(PRICE) is None


def test_price_scales_linearly_and_money_keeps_four_digits(served):
    a, b = served.price(1.0), served.price(3.0)
    assert b.usd_per_million_output_tokens == pytest.approx(3 * a.usd_per_million_output_tokens)
    assert [money(x) for x in (0.515, 4.8012, 12.3456, 0.00010994, 123456.789, None)] == [
        "$0.5150", "$4.801", "$12.35", "$0.0001099", "$123,456.79", "-",
    ]  # fmt: skip


@pytest.mark.parametrize("usd", [1e6, 1e-300, 0.001])
def test_an_extreme_price_prints_short_figures_not_hundreds_of_digits(served, usd):
    """A price far outside any market's (1e300 dollars a GPU-hour, or 1e-300) printed each
    figure in full: 300 digits of "$100,000,...", or "$0.00 an hour" for the fleet; money
    switches to four significant digits in scientific notation out there, and a price above
    price.MAX_PRICE (1e6) is refused (1e308 on 2 GPUs had printed "$inf")."""
    rows = dict(served.price(usd).rows())
    assert all(len(v) < 60 for k, v in rows.items() if k != "  priced on"), rows
    assert "$0.00 an hour" not in rows["price (given)"]
    assert money(usd * 2) in rows["price (given)"]


BAD = [-1, 0, -0.0, math.nan, math.inf, -math.inf, "2.5", "$2", True, None, [2.5], 1e400, 1e308]


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_api_refuses_a_bad_price_in_one_line(served, value):
    with pytest.raises(InvalidArgumentError) as exc:
        served.price(value)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("gpu_hour_price: must be ")
    assert "US dollars per GPU-hour" in msg
    with pytest.raises(InvalidArgumentError):
        price_of(served, value)


@pytest.mark.parametrize(
    "text", ["-1", "0", "nan", "inf", "-inf", "$2", "2.5usd", "", "1e400", "1e308", "1000001"]
)
def test_cli_refuses_a_bad_price_in_one_line(run, text):
    out, err = run("plan", "llama-3-8b", "-H", "H100-SXM", "--gpus", "1", "--gpu-hour-price", text,
                   code=2)  # fmt: skip
    lines = [x for x in (out + err).splitlines() if x.strip()]
    assert len(lines) == 1 and "'--gpu-hour-price'" in lines[0], lines
    assert "US dollars per GPU-hour" in lines[0]


PLAN = ("plan", "llama-3-8b", "-H", "H100-SXM", "--gpus", "2", "--tp", "1", "--isl", "1000",
        "--osl", "200", "--concurrency", "16")  # fmt: skip


def test_cli_plan_json_and_table_carry_the_price_only_when_given(run, served):
    plain = json.loads(run(*PLAN, "--format", "json")[0])
    priced = json.loads(run(*PLAN, "--format", "json", "--gpu-hour-price", "2.5")[0])
    assert "price" not in plain  # no price assumed: the JSON is as before
    price = priced.pop("price")
    assert priced == plain
    pr = served.price(PRICE)
    assert price["usd_per_million_output_tokens"] == pytest.approx(
        pr.usd_per_million_output_tokens, rel=1e-9
    )
    assert price["gpu_hour_usd"] == 2.5 and price["gpus"] == 2
    out = run(*PLAN, "--gpu-hour-price", "2.5")[0]
    assert "Cost at your GPU-hour price" in out
    assert money(pr.usd_per_million_output_tokens) in out


SEARCH = ("search", "qwen3-8b", "-H", "H100", "--gpus", "1", "--isl", "1000", "--osl", "200",
          "--tpot", "100ms")  # fmt: skip


def test_search_prices_every_point_by_its_tokens_per_gpu_and_ranks_as_before(run):
    args = (*SEARCH, "--format", "json", "--no-wall-time", "--throughput", "20k")
    plain = json.loads(run(*args)[0])
    priced = json.loads(run(*args, "--gpu-hour-price", "2.5")[0])
    assert priced.pop("gpu_hour_price") == 2.5
    target_hour = priced["throughput_target"].pop("usd_per_hour")
    assert target_hour == pytest.approx(priced["throughput_target"]["gpus"] * 2.5)
    for p in [priced["best"], *priced["frontier"]]:
        rate = p["output_tokens_per_s_per_gpu"]
        assert p.pop("usd_per_million_output_tokens") == pytest.approx(2.5 / (rate * 3600) * 1e6)
    assert priced == plain  # the same points, the same order: a price ranks nothing anew
    head, *rows = run(*SEARCH, "--format", "csv", "--gpu-hour-price", "2.5")[0].splitlines()
    assert head.split(",")[-1] == "usd_per_million_output_tokens" and rows


def test_compare_engines_adds_a_price_column_only_when_given(run):
    args = ("plan", "llama-3-8b", "-H", "H100-SXM", "--gpus", "1", "--isl", "1000", "--osl",
            "200", "--concurrency", "8", "--compare-engines", "--format", "json")  # fmt: skip
    plain = json.loads(run(*args)[0])
    priced = json.loads(run(*args, "--gpu-hour-price", "2")[0])
    assert all("usd_per_million_output_tokens" not in r for r in plain["engines"])
    for r in priced["engines"]:
        per_gpu = r["output_tokens_per_s_per_gpu"]
        assert r.pop("usd_per_million_output_tokens") == pytest.approx(2 / (per_gpu * 3600) * 1e6)
    assert priced["engines"] == plain["engines"]
