"""What a plan's tokens cost at a price per GPU-hour: the user's price, never a shipped one.

A deployment of ``G`` GPUs at ``P`` US dollars a GPU-hour costs ``P x G`` dollars an hour
whatever it serves; over the output tokens it serves an hour (``R`` tokens/s x 3,600), a
million output tokens cost ::

    usd_per_million_output_tokens = P x G / (R x 3,600) x 1e6

the whole fleet's hour charged to its output tokens (prompts' work included: nothing is
split off for them). Beside it, for a request mix of ``isl`` prompt and ``osl`` output
tokens, served at ``R / osl`` requests a second:

- ``usd_per_request``: the fleet's hour over the requests it serves an hour;
- ``usd_per_million_tokens``: over every token a request carries, prompt and output alike
  (``isl + osl`` a request; prompt tokens found in a prefix cache count as served);
- disaggregated serving, each pool's own hour over what it makes: the prefill pool's over the
  prompt tokens it takes (``usd_per_million_input_tokens``), the decode pool's over the output
  tokens (``decode_pool_usd_per_million_output_tokens``); the two add up to the fleet's hour.
  An aggregated deployment runs prompts and output in the same steps on the same GPUs: no
  split of its hour between them is measured, so none is given.

A plan without a request mix (``--seq-len`` / ``--batch``) prices its decode-only steps at
the batch timed (``decode_tokens_per_s``): prompts' passes are not in that rate, so it is the
floor of what serving costs, and it says so. The price is a rate of money, the tokens' rate
the plan's prediction: the cost carries the plan's expected error (README's accuracy table).

>>> round(per_million(2.0, 8, 1000.0), 6)  # 8 GPUs at $2 an hour serving 1,000 tokens/s
4.444444
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from mlacalc.words import arguments
from mlacalc.words.errors import InvalidArgumentError

#: the unit of a GPU-hour price, as the refusal of a bad one says it
UNIT = "US dollars per GPU-hour"
#: the highest price a GPU-hour taken: far above any GPU's, and low enough that no figure a
#: plan prints from it overflows
MAX_PRICE = 1e6


def check_price(name: str, value: Any) -> float:
    """A finite positive price a GPU-hour; None, -1, 0, inf, NaN, booleans and text refused in
    one line naming ``name`` (the API's argument or the CLI's option).

    >>> check_price("gpu_hour_price", -2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    mlacalc.words.errors.InvalidArgumentError: gpu_hour_price: must be a positive ...; got -2
    """
    number = arguments.rate(name, value, UNIT) if value is not None else None
    if number is None:
        raise InvalidArgumentError(name, f"must be a positive finite number of {UNIT}; got None")
    if number > MAX_PRICE:  # 1e308 a GPU-hour on 2 GPUs printed "$inf"
        raise InvalidArgumentError(
            name, f"must be at most {MAX_PRICE:,.0f} {UNIT} (a price of one GPU for an hour); "
            f"got {number:g}"
        )  # fmt: skip
    return number


def per_million(gpu_hour_usd: float, gpus: float, tokens_per_s: float) -> float:
    """Dollars a million tokens cost on ``gpus`` GPUs at ``gpu_hour_usd`` each an hour, at
    ``tokens_per_s`` tokens a second (all of them, not a GPU's)."""
    return gpu_hour_usd * gpus / (tokens_per_s * 3600.0) * 1e6


@dataclass(frozen=True)
class Price:
    """A plan's tokens at a price a GPU-hour (:func:`price_of`; ``Plan.price``)."""

    #: the price given, US dollars a GPU-hour
    gpu_hour_usd: float
    #: every GPU of the deployment (both pools, disaggregated)
    gpus: int
    #: ``gpu_hour_usd x gpus``
    fleet_usd_per_hour: float
    #: the output tokens a second the price is spread over (all GPUs)
    output_tokens_per_s: float
    #: the fleet's hour over the output tokens it serves an hour, a million of them
    usd_per_million_output_tokens: float
    #: the fleet's hour over every token the requests carry (prompt and output), a million
    #: of them; None without a request mix
    usd_per_million_tokens: float | None = None
    #: the fleet's hour over the requests it serves an hour; None without a request mix
    usd_per_request: float | None = None
    #: disaggregated: the prefill pool's hour over the prompt tokens it takes, a million of
    #: them; None aggregated
    usd_per_million_input_tokens: float | None = None
    #: disaggregated: the decode pool's hour over the output tokens, a million of them
    decode_pool_usd_per_million_output_tokens: float | None = None
    #: what the rate priced is, in words
    basis: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def rows(self) -> list[list[str]]:
        """The price's lines for a plan's table."""
        rows = [
            ["price (given)", f"${self.gpu_hour_usd:,.4g} a GPU-hour x {self.gpus:,} "
             f"GPU{'s' if self.gpus > 1 else ''} = {money(self.fleet_usd_per_hour)} an hour"],
            ["$ per million output tokens", money(self.usd_per_million_output_tokens)],
        ]  # fmt: skip
        if self.usd_per_million_tokens is not None:
            rows.append(["$ per million tokens (prompt + output)",
                         money(self.usd_per_million_tokens)])  # fmt: skip
        if self.usd_per_request is not None:
            rows.append(["$ per request", money(self.usd_per_request)])
        if self.usd_per_million_input_tokens is not None:
            rows.append(["  prefill pool: $ per million prompt tokens",
                         money(self.usd_per_million_input_tokens)])  # fmt: skip
            rows.append(["  decode pool: $ per million output tokens",
                         money(self.decode_pool_usd_per_million_output_tokens)])  # fmt: skip
        rows.append(["  priced on", self.basis])
        return rows


def money(usd: float | None) -> str:
    """Dollars with four significant digits, at least two decimals, trailing zeros kept
    (``$1.234``, ``$0.5150``, ``$0.0001099``, ``$12,345.67``); ``-`` for None.

    >>> money(0.515), money(4.8012), money(0.00010994), money(12345.678)
    ('$0.5150', '$4.801', '$0.0001099', '$12,345.68')

    Past a trillion dollars or under a millionth of a cent, four significant digits in
    scientific notation (a fixed form would print hundreds of digits):

    >>> money(8.6638e306), money(8.6638e-302)
    ('$8.664e+306', '$8.664e-302')
    """
    if usd is None:
        return "-"
    if usd and not 1e-8 <= abs(usd) < 1e12:
        return f"${usd:.4g}"
    decimals = 2 if usd >= 100 else max(2, 3 - math.floor(math.log10(usd))) if usd > 0 else 2
    return f"${usd:,.{decimals}f}"


def price_of(plan: Any, gpu_hour_usd: Any) -> Price | None:
    """A plan's tokens at ``gpu_hour_usd`` a GPU-hour (checked: a finite positive number);
    None where the plan timed no tokens (nothing fits)."""
    usd = check_price("gpu_hour_price", gpu_hour_usd)
    gpus = plan.gpus + plan.prefill_gpus
    served = plan.isl is not None and bool(plan.output_tokens_per_s)
    rate = plan.output_tokens_per_s if served else plan.decode_tokens_per_s
    if not rate:
        return None
    extra: dict[str, Any] = {}
    if served:
        osl, isl = plan.osl, plan.isl
        per_s = rate / osl  # requests a second
        extra = {
            "usd_per_million_tokens": per_million(usd, gpus, per_s * (isl + osl)),
            "usd_per_request": usd * gpus / (per_s * 3600.0),
            "basis": f"{rate:,.1f} output tokens/s served ({per_s:,.4g} requests/s of "
            f"{isl:,} prompt and {osl:,} output tokens), prompts' passes included"
            + (
                "; the deployment does not keep up with the offered load: what it serves"
                if not plan.sustainable
                else ""
            ),
        }
        if plan.mode == "disaggregated" and plan.prefill_gpus:
            extra["usd_per_million_input_tokens"] = per_million(usd, plan.prefill_gpus, per_s * isl)
            extra["decode_pool_usd_per_million_output_tokens"] = per_million(usd, plan.gpus, rate)
    else:
        extra["basis"] = (
            f"{rate:,.1f} output tokens/s of decode-only steps at batch {plan.decode_batch:,} "
            "(no prompt's pass: a floor on what serving costs; a request mix, isl and osl, "
            "gives the served rate)"
        )
    return Price(
        gpu_hour_usd=usd,
        gpus=gpus,
        fleet_usd_per_hour=usd * gpus,
        output_tokens_per_s=rate,
        usd_per_million_output_tokens=per_million(usd, gpus, rate),
        **extra,
    )
