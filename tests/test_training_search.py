"""training_search / `mlacalc train-search`: the pruned search against a brute-force pricing of
the same space, what it says where nothing fits, and one-line errors for bad input."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

import mlacalc
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving.plan_checks import usable_of
from mlacalc.training.cost import model_argument, training_cost
from mlacalc.training.layout_search import ACTIVATIONS, STATES, bound_of, setting, training_search
from mlacalc.training.step import expert_dp, make_layout
from mlacalc.words.errors import MlacalcError


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def _kwargs(lay: dict) -> dict:
    """training_cost's layout arguments from a Layout's fields (less the micro-batch)."""
    names = {"tp": "tp", "pp": "pp", "dp": "dp", "ep": "ep", "cp": "cp", "vp": "virtual_stages"}
    names["global_batch"] = "global_batch"
    return {names[k]: v for k, v in lay.items() if k in names}


def _brute(name, hardware, gpus, batch, seq_len, vps, policies):
    """Every (tp, cp, pp, dp, ep, v, ZeRO, recompute, micro-batch) with tp within the 8-GPU
    node, each priced (the cost function's refusal is what makes a tuple no layout), the
    fitting ones timed: the tried count, the not-fit counts by reason (the weights and states
    where they are over at the shape's least activations: the last policy, the smallest
    micro-batch) and the timed ones, fastest first. ZeRO stages over one rank that shard
    nothing are one layout (ZeRO-1)."""
    m = model_argument(name)
    hw = load_hardware(hardware)
    usable = usable_of(int(hw.memory_bytes), 0, 0.1)
    tried, reasons, fits = 0, Counter(), []
    experts = m.n_routed_experts if m.is_moe else 1
    for tp in [t for t in _divisors(gpus) if t <= 8]:
        for cp in _divisors(gpus // tp):
            for pp in _divisors(gpus // (tp * cp)):
                dp = gpus // (tp * cp * pp)
                for ep in _divisors(math.gcd(experts, dp * cp * tp)):
                    for v in vps:
                        for mb in _divisors(batch):
                            try:
                                lay = make_layout(m, tp, pp, dp, ep, mb, batch, cp, seq_len, v)
                            except MlacalcError:
                                continue
                            shards = dp * cp > 1 or (m.is_moe and expert_dp(lay) > 1)
                            first = min(  # the smallest micro-batch the schedule runs
                                b
                                for b in _divisors(batch // dp)
                                if v == 1 or (batch // (dp * b)) % pp == 0
                            )
                            for zero in (0, 1, 2, 3) if shards else (1,):
                                ref = training_cost(m, seq_len, first, recompute=policies[-1],
                                                    tp=tp, pp=pp, dp=dp, ep=ep, cp=cp,
                                                    virtual_stages=v, global_batch=batch,
                                                    zero=zero)  # fmt: skip
                                over = sum(ref.states_per_gpu.values()) > usable
                                for r in policies:
                                    kw = _kwargs(ref.layout.__dict__)
                                    kw.update(recompute=r, zero=zero)
                                    c = training_cost(m, seq_len, mb, **kw)
                                    tried += 1
                                    if c.memory_per_gpu <= usable:
                                        fits.append(
                                            training_cost(m, seq_len, mb, hardware=hw, **kw)
                                        )
                                    elif over:
                                        reasons[STATES] += 1
                                    else:
                                        reasons[ACTIVATIONS] += 1
    fits.sort(key=lambda c: (c.time.step_s, c.layout.gpus, c.memory_per_gpu))
    return tried, reasons, fits


@pytest.mark.parametrize(
    ("name", "batch", "seq_len", "vps", "policies"),
    [
        ("llama-3.1-8b", 8, 8192, (1, 2), ("none", "full")),
        ("deepseek-v2-lite", 8, 4096, (1,), ("none", "kv_up", "full")),
    ],
    ids=["llama-8b-interleaved", "dsv2-lite-moe-mla"],
)
def test_the_pruned_search_equals_a_brute_force_pricing(name, batch, seq_len, vps, policies):
    """4 H100s, where the states, the activations or neither are over depending on the layout:
    the same layouts tried, the same counts by reason, the same top 5 with the same steps."""
    s = training_search(name, "H100", 4, batch, seq_len, virtual_stages=vps, top=5)
    tried, reasons, fits = _brute(name, "H100", 4, batch, seq_len, vps, policies)
    assert reasons[STATES] and reasons[ACTIVATIONS] and fits  # every branch of the pruning
    assert (s.tried, s.fitted, s.not_fit) == (tried, len(fits), dict(reasons))
    rows = _fold_zero(fits)
    assert [setting(c) for c in s.ranked] == [setting(c) for c, _ in rows[:5]]
    assert [c.time.step_s for c in s.ranked] == [c.time.step_s for c, _ in rows[:5]]
    assert [s.ties(i) for i in range(len(s.ranked))] == [t for _, t in rows[:5]]
    assert s.priced < tried  # pruned: fewer pricings than layouts


def _fold_zero(fits):
    """The ranked layouts with each that differs from an earlier one only by the ZeRO stage,
    at the same step, dropped and its stage listed beside that one (ascending: one order in
    the table and its footer)."""
    rows, seen = [], {}
    for c in fits:
        same = {k: v for k, v in setting(c).items() if k != "zero"}
        key = (tuple(sorted(same.items())), c.time.step_s)
        if key in seen:
            seen[key].append(c.zero)
        else:
            seen[key] = []
            rows.append((c, seen[key]))
    return [(c, tuple(sorted(t))) for c, t in rows]


def test_zero_stages_with_the_same_step_are_one_row():
    """DeepSeek-V2-Lite on 8 H100s: ZeRO-1, -2 and -3 of one layout take the same step (their
    traffic hidden) and had filled the top rows; now one row a layout, the stage with the least
    memory, the others named beside it (table and JSON)."""
    s = training_search("deepseek-v2-lite", "H100", 8, 64, 4096, top=5)
    keys = [(tuple(v for k, v in setting(c).items() if k != "zero"), c.time.step_s)
            for c in s.ranked]  # fmt: skip
    assert len(set(keys)) == len(keys) == 5
    assert any(s.ties(i) for i in range(5))
    for i, c in enumerate(s.ranked):
        for z in s.ties(i):
            other = training_cost("deepseek-v2-lite", 4096, c.layout.micro_batch,
                                  recompute=c.recompute, zero=z, hardware="H100",
                                  **_kwargs(c.layout.__dict__))  # fmt: skip
            assert other.time.step_s == c.time.step_s
            assert other.memory_per_gpu >= c.memory_per_gpu
    assert s.to_dict()["ranked"][0]["tied_zero"] == list(s.ties(0))


def test_materialized_attention_searches_no_context_parallelism():
    """The absorbed path's materialized attention refuses cp > 1: no such layout is tried
    (they had been counted as 'refused (cp)')."""
    s = training_search("deepseek-v2-lite", "H100", 4, 8, 4096, impl="absorbed", top=3)
    assert s.ranked and all(c.layout.cp == 1 for c in s.ranked)
    assert not any(k.startswith("refused") for k in s.not_fit)
    with pytest.raises(MlacalcError, match=r"^cp.*flash kernel around the ring.*use cp 1"):
        training_search("deepseek-v2-lite", "H100", 4, 8, 4096, impl="absorbed", cp=2)


def test_the_bound_is_the_largest_part_of_the_step():
    s = training_search("llama-3.1-8b", "H100", 8, 64, 4096, top=1, recompute="full", pp=(2,))
    c = s.best
    name, share = bound_of(c)
    t = c.time
    assert name == "compute" and 0.5 < share <= 1
    busy = t.forward_s + t.backward_s + t.recompute_s
    compute = c.layout.micro_batches * min(t.micro_batch_s, busy)
    assert share == pytest.approx(compute / t.step_s)
    assert t.bubble_s > 0  # a pipeline's bubble, a smaller part


def test_nothing_fits_says_what_to_change():
    s = training_search("deepseek-v3", "H100", 8, 8, 4096)
    assert not s.ranked and s.fitted == 0 and set(s.not_fit) == {STATES}
    assert "more GPUs" in s.advice and "LoRA" in s.advice
    s = training_search("llama-3.1-8b", "H100", 8, 8, 1 << 20, cp=1)
    assert not s.ranked and s.not_fit.get(ACTIVATIONS)
    assert "activations" in s.advice and "cp" in s.advice


def test_exported():
    assert "training_search" in mlacalc.__all__
    assert mlacalc.training_search is training_search
    assert mlacalc.training.training_search is training_search


def test_cli_train_search_table_and_json(run):
    argv = ("train-search", "llama-3.1-8b", "--hw", "H100", "--gpus", "8", "--global-batch",
            "16", "--pp", "1,2", "--cp", "1", "--top", "3")  # fmt: skip
    out, err = run(*argv)
    text = " ".join(out.split())  # the note wraps
    assert "fastest training layouts on 8 x H100-SXM" in text and "layouts tried" in text
    assert "mlacalc train llama-3.1-8b --hw H100-SXM" in text and not err
    doc = json.loads(run(*argv, "--format", "json")[0])
    assert len(doc["ranked"]) == 3 and doc["tried"] >= doc["fitted"] > 0
    assert doc["ranked"][0]["setting"]["cp"] == 1 and doc["ranked"][0]["bound"]


def test_cli_train_search_nothing_fits_warns_in_one_line(run):
    out, err = run("train-search", "deepseek-v3", "--hw", "H100", "--gpus", "8",
                   "--global-batch", "8")  # fmt: skip
    assert err.startswith("mlacalc: warning: no layout fits:") and err.count("\n") == 1
    assert "0 fit" in " ".join(out.split())


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (
            ["--gpus", "0"],
            "--gpus: '0' is outside 1..1,048,576 GPUs; write a whole number of "
            "GPUs, e.g. 64, or a list, e.g. 64,128",
        ),
        # a micro-batch is sequences, not ranks (it had read "outside 1..1,048,576 ranks")
        (["--micro-batch", "0"], "'0' is outside 1..1,048,576 sequences"),
        (["--virtual-stages", "x"], "'x' is not a count of stages"),
        (["--gpus", "-8"], "--gpus"),
        (["--gpus", "12"], "--gpus"),  # not whole 8-GPU nodes
        (["--gpus", "64", "--pp", "1", "--cp", "1", "--global-batch", "7"], "--global-batch"),
        (["--global-batch", "0"], "--global-batch"),
        (["--tp", "3"], "--tp"),
        (["--zero", "5"], "--zero: '5' is not one of 0, 1, 2, 3; give one or several, e.g. 1,3"),
        # the refusals name the cause, as `mlacalc train` does (they had read "no layout of 8
        # GPUs divides as ... with ep as given")
        (["--ep", "2"], "Llama-3.1-8B has no experts to spread over 2 ranks; use --ep 1"),
        (["--micro-batch", "3"], "no micro-batch of 3 divides a data-parallel rank's share"),
        (["--pp", "64"], "--pp: with pp 64 no layout of 8 GPUs divides"),
        (["--recompute", "kv_up"], "--recompute"),
        (["--recompute", "some"], "--recompute"),
        (["--hw", "B999"], "hardware"),
        (["--top", "0"], "--top"),
        (["--lora-rank", "5000"], "--lora-rank"),
    ],
)
def test_cli_train_search_errors_are_one_line(run, argv, fragment):
    base = {"--hw": "H100", "--gpus": "8", "--global-batch": "64"}
    words = list(argv)
    for flag, value in base.items():
        if flag not in words:
            words += [flag, value]
    out, err = run("train-search", "llama-3.1-8b", *words, code=2)
    assert fragment in err and err.count("\n") == 1 and not out


def test_unknown_model_is_one_line(run):
    _, err = run("train-search", "llama-9", "--hw", "H100", "--gpus", "8",
                   "--global-batch", "8", code=2)  # fmt: skip
    assert "unknown model 'llama-9'" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"gpus": 0}, "gpus"),
        ({"gpus": 12}, "gpus"),
        ({"global_batch": -1}, "global_batch"),
        ({"zero": 4}, "zero"),
        ({"tp": 0}, "tp"),
        ({"bogus": 1}, "bogus"),
        ({"memory_reserve": 1.5}, "memory_reserve"),
    ],
)
def test_training_search_mutations_name_the_field(kwargs, field):
    given = {"model": "llama-3.1-8b", "hardware": "H100", "gpus": 8, "global_batch": 64}
    with pytest.raises(MlacalcError) as e:
        training_search(**{**given, **kwargs})
    assert str(e.value).startswith(field)


class _NoStore(dict):
    """A cache that keeps nothing: every lookup misses."""

    def __setitem__(self, key, value):
        pass


def test_the_caches_spare_work_and_change_nothing(monkeypatch):
    """The search times a stage's kernels once for every layout sharing them (step._SECONDS)
    and builds a micro-batch's forward kernels once (flops._FORWARD), both dropped at its end:
    the same search with both caches keeping nothing gives the same result, with more kernel
    timings and builds. (On 4 GPUs and 8 sequences a step: 102 timings and 5 builds against
    491 and 390 without the caches; on 8 GPUs and 16 it was 354 and 6 against 3,392 and
    3,148, the same checks, 10.5 s of a CI worker.)"""
    from mlacalc.training import flops, layout_search, step

    calls = Counter()

    def counted(name, fn):
        def inner(*a, **kw):
            calls[name] += 1
            return fn(*a, **kw)

        return inner

    monkeypatch.setattr(step, "predict_kernels", counted("time", step.predict_kernels))
    monkeypatch.setattr(flops, "step_kernels", counted("build", flops.step_kernels))

    def search():
        calls.clear()
        out = training_search("deepseek-v2-lite", "H100", 4, 8, 4096, top=5)
        return json.dumps(out.to_dict(), sort_keys=True, default=str), dict(calls)

    cached, spent = search()
    assert step._SECONDS.get() is None and flops._FORWARD.get() is None  # dropped with it
    monkeypatch.setattr(layout_search, "_STORE", _NoStore)
    plain, full = search()
    assert cached == plain
    assert spent["time"] < 0.6 * full["time"] and spent["build"] < full["build"] / 10


def test_a_search_ending_on_one_thread_leaves_another_threads_pricing_alone():
    """The search's caches are context variables: a review ran two searches and a
    training_cost on three threads (as the app serves sessions) and the plain pricing failed
    within a minute (TypeError: 'NoneType' object does not support item assignment) when one
    search's end set the module-level store to None under it."""
    import threading

    from mlacalc.training import flops, layout_search, step
    from mlacalc.training.cost import training_cost

    inside, ended, errors = threading.Event(), threading.Event(), []

    def searching():
        try:
            with layout_search.memo():
                assert step._SECONDS.get() is not None
                inside.set()
                ended.wait(30)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t = threading.Thread(target=searching)
    t.start()
    inside.wait(30)
    # this thread sees no store while the other thread's search holds one ...
    assert step._SECONDS.get() is None and flops._FORWARD.get() is None
    with layout_search.memo():
        ended.set()  # ... and the other's end leaves this thread's store in place
        t.join(30)
        assert step._SECONDS.get() is not None
        cost = training_cost("llama-3.1-8b", 4096, hardware="H100")
    assert cost.time.step_s > 0 and not errors
    assert step._SECONDS.get() is None


def test_tp_beyond_the_kv_heads_is_priced_with_them_replicated():
    """Llama-3.1-8B has 8 K/V heads: at tp 16 (one GB200 NVL72 rack) each rank holds a whole
    head, replicated, as `mlacalc train` and the serving layout price it: the search's layout
    is train's, its weights more than half of tp 8's."""
    s = training_search("llama-3.1-8b", "GB200", 16, 16, 4096, tp=16, recompute="full", top=1)
    c = s.best
    assert c.layout.tp == 16 and s.fitted
    same = training_cost("llama-3.1-8b", 4096, c.layout.micro_batch, recompute=c.recompute,
                         zero=c.zero, hardware="GB200", **_kwargs(c.layout.__dict__))  # fmt: skip
    assert (same.memory_per_gpu, same.time.step_s) == (c.memory_per_gpu, c.time.step_s)
    half = training_cost("llama-3.1-8b", 4096, 1, tp=8, global_batch=16, zero=c.zero)
    assert c.params_per_gpu > half.params_per_gpu / 2


def test_a_gb200_job_is_whole_trays_not_whole_racks(run):
    """A GB200 NVL72 rack is one 72-GPU NVLink domain of 4-GPU trays: 256 GPUs (three racks
    and part of a fourth, each tensor-parallel group within one) are searched as `train`
    prices them, where whole racks had been asked for ("use 216 or 288", every power of two
    above 72 refused); a count that is not whole trays is refused naming the tray."""
    s = training_search("llama-3.1-8b", "GB200", 256, 256, 4096, tp=8, pp=1, cp=1, zero=1,
                        recompute="full", micro_batch=1, top=1)  # fmt: skip
    c = s.best
    assert c.layout.gpus == 256 and c.layout.tp == 8 and c.layout.dp == 32
    same = training_cost("llama-3.1-8b", 4096, 1, recompute="full", zero=1, hardware="GB200",
                         **_kwargs(c.layout.__dict__))  # fmt: skip
    assert same.time.step_s == c.time.step_s
    _, err = run("train-search", "llama-3.1-8b", "--hw", "GB200", "--gpus", "6",
                 "--global-batch", "64", code=2)  # fmt: skip
    assert "6 GPUs are not whole 4-GPU nodes of GB200: use 4 or 8" in err


def test_the_zero_bubble_schedule_is_held_fixed_as_train_takes_it(run):
    """train's --schedule zb-h1 (whole stages only) is a fixed setting of the search too: the
    layouts priced as train prices them, interleaving alone refused with its cause."""
    s = training_search("llama-3.1-8b", "H100", 8, 16, 4096, pp=2, schedule="zb-h1", top=1)
    c = s.best
    same = training_cost("llama-3.1-8b", 4096, c.layout.micro_batch, recompute=c.recompute,
                         zero=c.zero, hardware="H100", schedule="zb-h1",
                         **_kwargs(c.layout.__dict__))  # fmt: skip
    assert same.time.step_s == c.time.step_s and c.time.schedule == "zb-h1"
    with pytest.raises(MlacalcError, match=r"^virtual_stages.*use|^virtual_stages.*schedule"):
        training_search("llama-3.1-8b", "H100", 8, 16, 4096, schedule="zb-h1", virtual_stages=2)
    out, _ = run("train-search", "llama-3.1-8b", "--hw", "H100", "--gpus", "8", "--pp", "2",
                 "--global-batch", "16", "--schedule", "zb-h1", "--top", "1")  # fmt: skip
    assert "--schedule zb-h1" in " ".join(out.split())


def test_qlora_nf4_searches_no_zero_3_and_says_why_when_asked():
    """NF4 under ZeRO-3 is not built (the cost function refuses it): the search had priced it
    and counted those layouts as 'on the refused (base_dtype)', or, with --zero 3 alone,
    advised 'every layout was refused (refused (base_dtype))'."""
    kw = {"lora_rank": 16, "base_dtype": "nf4", "tp": 1, "pp": 1, "cp": 1}
    s = training_search("llama-3.1-8b", "H100", 8, 16, 4096, top=3, **kw)
    assert s.ranked and not any(k.startswith("refused") for k in s.not_fit)
    assert all(c.zero != 3 for c in s.ranked)
    with pytest.raises(MlacalcError, match=r"^zero.*'nf4' under ZeRO-3.*search zero 0, 1 or 2"):
        training_search("llama-3.1-8b", "H100", 8, 16, 4096, zero=3, **kw)


def test_the_refused_count_reads_as_the_cost_functions_refusal():
    from mlacalc.cli.train_search_cmd import _reason

    assert _reason("refused (base_dtype)", 4) == "4 refused by the cost function (base_dtype)"
    assert _reason(ACTIVATIONS, 1200) == "1,200 on the activations"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["train", "deepseek-v2-lite", "-s", "4k", "--hw", "H100", "--cp", "2", "--impl",
          "absorbed"], "use --cp 1, or --impl expanded"),
        (["train-search", "llama-3.1-8b", "--hw", "H100", "--gpus", "8", "--ep", "2",
          "--global-batch", "64", "-s", "4k"], "use --ep 1 or leave it out"),
        (["train-search", "llama-3.1-8b", "--hw", "H100", "--gpus", "8", "--schedule", "zb-h1",
          "--virtual-stages", "2", "--global-batch", "64", "-s", "4k"],
         "search --virtual-stages 1, or --schedule 1f1b"),
        (["train-search", "llama-3.1-8b", "--hw", "H100", "--gpus", "8", "--tp", "3",
          "--global-batch", "64", "-s", "4k"],
         "within a node of 8 GPUs (its num_key_value_heads split or copied whole), 2 x cp"),
    ],
)  # fmt: skip
def test_the_cli_advice_names_the_commands_options(run, argv, said):
    """A review read the library's fields in the command's advice ("use cp 1, or impl
    expanded", "search virtual_stages 1, or schedule 1f1b") and "a 8-GPU node"."""
    _, err = run(*argv, code=2)
    assert said in err and "\n" not in err.strip()


def test_the_search_words_a_review_found(run):
    """ZeRO ties in one order in the table, its footer and JSON ('3 (or 2, 1)' beside a
    footer of '3 (or 1, 2)'); zb-h1 with virtual_stages 1,2 says it drops 2 (was silent); a
    micro-batch that divides no share says "a divisor of one of those shares"."""
    s = training_search("deepseek-v2-lite", "H100", 8, 64, 4096, top=5)
    assert all(list(s.ties(i)) == sorted(s.ties(i)) for i in range(len(s.ranked)))
    s = training_search(
        "llama-3.1-8b", "H100", 8, 16, 4096, pp=2, schedule="zb-h1", virtual_stages=[1, 2], top=1
    )
    assert len(s.notes) == 1 and "virtual_stages 2 not searched" in s.notes[0]
    assert s.to_dict()["notes"] == list(s.notes)
    out, _ = run("train-search", "llama-3.1-8b", "--hw", "H100", "--gpus", "8", "--pp", "2",
                 "--global-batch", "16", "--schedule", "zb-h1", "--virtual-stages", "1,2",
                 "--top", "1")  # fmt: skip
    assert "virtual_stages 2 not searched" in " ".join(out.split())
    with pytest.raises(MlacalcError, match="a divisor of one of those shares"):
        training_search("llama-3.1-8b", "H100", 8, 16, 4096, micro_batch=3)
