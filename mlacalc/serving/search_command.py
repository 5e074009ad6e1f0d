"""The ``mlacalc plan`` command line that gives a search point's figures: one rule for
:meth:`mlacalc.serving.search.SearchResult.to_dict` (``plan_command``) and ``mlacalc search``
(its JSON and its text)."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from typing import Any

from mlacalc.models.loading import load_model, shipped_models
from mlacalc.models.schema import SPECS, ModelConfig
from mlacalc.words import defaults as D
from mlacalc.words.errors import ConfigError

#: How the routing loads the experts when not given (:func:`mlacalc.plan`'s defaults)
ROUTING_DEFAULTS = {
    "routing": "random",
    "expert_skew": 0.0,
    "rebalance": None,
    "routing_imbalance": 1.0,
    # TensorRT-LLM's MoE backend of every point (None: its default; not searched over)
    "moe_backend": None,
}

#: plan's flag word of each component's weight format (``--expert-dtype``), by component
COMPONENT_FLAG_WORDS = {
    "attention": "attention",
    "dense_ffn": "dense-ffn",
    "experts": "expert",
    "shared_experts": "shared-expert",
    "embeddings": "embedding",
    "head": "head",
}


def component_flags(formats: dict[str, str] | None) -> list[str]:
    """``plan``'s flags for a point's component formats."""
    return [f"--{COMPONENT_FLAG_WORDS[c]}-dtype {f}" for c, f in (formats or {}).items()]


def concurrency_word(value: float) -> str:
    """A point's concurrency as ``--concurrency`` takes it: a whole number as one (``128``),
    else rounded to the fewest decimals that stay within a quarter of
    :data:`mlacalc.words.defaults.CONCURRENCY_SNAP` of it (``517.95`` for 517.9548047710623): plan
    reads a concurrency that close to a whole decode batch's in-flight count as that count,
    so the rounded command gives the point's figures exactly (a disaggregated point's
    concurrency is such a count; plan's closed loop jumps between whole batches, so rounding
    without that snap moved TTFT and TPOT by up to 41%)."""
    value = float(value)
    if value.is_integer():
        return str(int(value))
    for digits in range(1, 10):
        if abs(round(value, digits) - value) <= 0.25 * D.CONCURRENCY_SNAP * value:
            return f"{value:.{digits}f}"
    return repr(value)


#: a config's fields that name it rather than shape it (``with_changes`` keeps the rest)
_NAMING = ("name", "display_name", "source", "aliases", "notes", "origin", "derived", "view")


def model_replay(model: Any, loaded: ModelConfig) -> tuple[str, str] | None:
    """The model as ``mlacalc plan`` takes it back, for a search's plan command: its argument
    and the `` --set FIELD=VALUE`` words after the command ("" for none). A name or path given
    as text: as given. A :class:`ModelConfig`: a shipped model's name (its own, or the base
    named in its ``derived from`` source lines) and ``--set`` of each field it changes, as
    ``mlacalc search --set`` writes them, where that replays it field for field; else the
    file it was read from, unchanged (its ``origin``, where the file still reads as it); else
    None (a config built in code, or a file's config changed after reading: no command names
    it)."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model), ""
    shipped = set(shipped_models())
    derived = re.findall(r"^derived from (\S+) by ", "\n".join(loaded.source), re.M)
    bases = [loaded.name, *derived]
    for base in dict.fromkeys(b for b in bases if b in shipped):
        words = _replayed(load_model(base), loaded)
        if words is not None:
            return base, words
    origin = str(getattr(loaded, "origin", "") or "")
    if origin and os.path.isfile(origin):  # read from a file: the file, as plan reads it
        try:
            words = _replayed(load_model(origin), loaded)
        except (ConfigError, OSError, ValueError):  # the file no longer reads as it did
            return None
        if words is not None:
            return origin, words
    return None


def _replayed(base: ModelConfig, model: ModelConfig) -> str | None:
    """`` --set FIELD=VALUE`` of each field where ``model`` differs from ``base`` ("" for
    none), or None where a value has no ``--set`` text or the changes do not give ``model``."""
    shape = [f.name for f in dataclasses.fields(ModelConfig) if f.name not in _NAMING]
    changed = {k: getattr(model, k) for k in shape if getattr(model, k) != getattr(base, k)}
    if any(k not in SPECS or not _settable(v) for k, v in changed.items()):
        return None
    try:
        again = base.with_changes(**changed) if changed else base
    except (ConfigError, ValueError, TypeError):  # refused: no command replays it
        return None
    if any(getattr(again, k) != getattr(model, k) for k in shape):
        return None
    return set_words(changed)


def _settable(value: Any) -> bool:
    """Whether ``--set`` reads ``value``'s text back as ``value``: null, a bool, a number, a
    word that is not one of those, or a list of them."""
    if isinstance(value, (list, tuple)):
        return all(_settable(v) and not isinstance(v, (list, tuple)) for v in value)
    if value is None or isinstance(value, (bool, int, float)):
        return True
    if not isinstance(value, str) or not value or "," in value or value != value.strip():
        return False
    if value.lower() in ("null", "none", "true", "false"):
        return False
    try:
        float(value)
    except ValueError:
        return True
    return False


def set_words(sets: dict[str, Any] | None) -> str:
    """``--set`` for a command line mlacalc prints (search's plan command, the CLI's and the
    library's): each ``FIELD=VALUE`` shell-quoted, a space before each, a value as the user
    typed it where ``sets`` keeps that (the CLI's ``SetChanges.typed``); "" for none."""
    if not sets:
        return ""
    typed = getattr(sets, "typed", {})
    return "".join(
        f" --set {shlex.quote(f'{k}={typed.get(k) or set_text(v)}')}" for k, v in sets.items()
    )


def set_text(value: Any) -> str:
    """A value as ``--set`` reads it (``null``, ``true``, ``256``, ``[4,8]``; the CLI's
    reproduce lines and the library's plan command write it so)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(set_text(v) for v in value) + "]"
    return repr(value) if isinstance(value, float) else str(value)


def plan_command(model: str, hardware: str, result, p: dict[str, Any], profile=None) -> str:
    """The ``mlacalc plan`` command line that gives a point's figures: the point's deployment
    and every option of the search that changes them (memory reserve, page size, the engine of
    aggregated points, the profile), each word shell-quoted."""
    words = [
        "mlacalc plan",
        shlex.quote(str(model)),
        f"-H {shlex.quote(str(hardware))}",
        f"--gpus {p['decode_gpus']}",
        f"--tp {p['tp']}",
    ]
    if p["pp"] > 1:
        words.append(f"--pp {p['pp']}")
    if p["ep"] > 1:
        words.append(f"--ep {p['ep']}")
    if p["redundant_experts"]:
        words.append(f"--redundant-experts {p['redundant_experts']}")
    if p["dp_attention"] and p.get("dp", 1) > 1:  # one attention group: plain TP
        words.append("--dp-attention")
    if p["overlap"] != "none":
        words.append(f"--overlap {p['overlap']}")
    words += routing_words(result, p)
    if not str(p["weight_format"]).startswith("checkpoint "):  # a checkpoint: as it stores
        words.append(f"--weight-dtype {shlex.quote(str(p['weight_dtype']))}")
    words += component_flags(p.get("component_dtypes"))
    if getattr(result, "state_dtype", None) is not None:  # a recurrent state's, as searched
        words.append(f"--state-dtype {result.state_dtype}")
    if getattr(result, "engine_memory", None) is not None:  # the engine's own setting
        words.append(f"--engine-memory {float(result.engine_memory)!r}")
    elif getattr(result, "memory_reserve", D.MEMORY_RESERVE) != D.MEMORY_RESERVE:
        words.append(f"--memory-reserve {float(result.memory_reserve)!r}")
    # the page said whenever an engine's defaults chose it: plan's own default follows
    # --engine-defaults, the command's page does not
    page = getattr(result, "page_size", D.PAGE_SIZE)
    if page != D.PAGE_SIZE or getattr(result, "scheduler_defaults", None):
        words.append(f"--page-size {page}")
    words += [
        f"--kv-dtype {shlex.quote(str(p['kv_dtype']))}",
        f"--isl {result.isl}",
        f"--osl {result.osl}",
        f"--concurrency {concurrency_word(p['concurrency'])}",
    ]
    if getattr(result, "prefix_cache_hit", 0.0):  # as written (plan reads the decimal)
        words.append(f"--prefix-cache-hit {result.prefix_cache_hit!r}")
    if getattr(result, "shared_prefix", 0):
        words.append(f"--shared-prefix {result.shared_prefix}")
    if p["mode"] == "disaggregated":
        words += [
            "--mode disaggregated",
            f"--prefill-gpus {p['prefill_gpus']}",
            f"--prefill-tp {p['prefill_tp']}",
            f"--prefill-ep {p['prefill_ep']}",
            "--prefill-dp-attention"
            if p["prefill_dp_attention"] and p["prefill_gpus"] > p["prefill_tp"]
            else "--no-prefill-dp-attention",
        ]
        if p.get("prefill_redundant_experts") != p["redundant_experts"]:
            words.append(f"--prefill-redundant-experts {p['prefill_redundant_experts']}")
    else:
        if p.get("chunked_prefill"):
            words.append(f"--chunked-prefill {p['chunked_prefill']}")
        if result.prefill_pass != "fused":
            words.append(f"--prefill-pass {result.prefill_pass}")
        if result.output_lag_steps:
            words.append(f"--output-lag-steps {result.output_lag_steps}")
    if profile is not None:
        words.append(f"--profile {shlex.quote(str(profile))}")
    return " ".join(str(w) for w in words)


def routing_words(result, p: dict[str, Any]) -> list[str]:
    """plan's routing options of a point as the search timed it: ``--routing`` wherever
    given, the expert ranks' options where a pool of the point has expert ranks (plan
    refuses them otherwise; the search timed such a point without them)."""
    words = []
    ranks = p["ep"] > 1 or (p.get("prefill_ep") or 1) > 1
    for name, value in getattr(result, "routing", {}).items():
        if name == "moe_backend":  # where the point's experts take it (plan refuses it else)
            value = p.get("moe_backend", value)
        everywhere = name in ("routing", "moe_backend")  # not the expert ranks' alone
        if value == ROUTING_DEFAULTS.get(name) or (not everywhere and not ranks):
            continue
        flag = "--" + name.replace("_", "-")
        if name == "rebalance":
            words.append(flag if value else "--no-rebalance")
        else:
            words.append(f"{flag} {value!r}" if isinstance(value, float) else f"{flag} {value}")
    return words


def scheduler_words(serving_engine: str | None, values: dict[str, Any]) -> str:
    """The plan options that run a search's engine as the search did: its kernels, the
    admission values it used, and no other defaults (plan would add the engine's chunked
    prefill; a point's own chunked prefill is in :func:`plan_command`)."""
    words = []
    if serving_engine is not None:
        words += [f"--engine {serving_engine}", "--engine-defaults none"]
    if values["max_running"] is not None:
        words.append(f"--max-running {values['max_running']}")
    if values["max_tokens"] is not None:
        words.append(f"--max-tokens {values['max_tokens']}")
    if values["host_step_s"]:
        words.append(f"--host-step-ms {values['host_step_s'] * 1e3!r}")
    # overlap with no host work to hide changes nothing, and plan would warn that it does not
    idle = values.get("host_idle", not values["host_step_s"])
    if not values["overlap_schedule"] and not idle:
        words.append("--no-overlap-schedule")
    return "".join(f" {w}" for w in words)
