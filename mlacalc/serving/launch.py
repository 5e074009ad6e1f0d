"""The command lines that start a planned deployment on a serving engine: SGLang's
``python -m sglang.launch_server``, vLLM's ``vllm serve`` and TensorRT-LLM's ``trtllm-serve``,
with the options for the point's layout (tensor, data, pipeline and expert parallelism,
DP-attention, redundant experts, two-batch overlap), its KV dtype, its running batch, the
engine's token budget and chunked prefill, CUDA graphs, overlap scheduling and MTP drafts.

A disaggregated point is two servers (its prefill pool and its decode pool) and the engine's
own router or proxy in front of them; each pool's command is given, the router named. A pool
of more GPUs than a node is one server across nodes: the command is run on each node with its
rank (the options that say so are given with ``$NODE_RANK`` and ``$HEAD`` to fill); vLLM's
tensor- or pipeline-parallel group wider than a node is one server on a Ray cluster.

Each engine counts some options its own way, as stated beside them: SGLang's ``--tp`` is the
GPUs of the instance under DP-attention (its ``--dp`` the attention groups), TensorRT-LLM's
``--tp_size`` likewise with ``enable_attention_dp``; vLLM shares the experts over every GPU of
the instance (``--enable-expert-parallel``: EP = TP x DP). The option names are those of SGLang
0.4.9, vLLM 0.10 (its CUDA-graph size: 0.11's key, from recall) and TensorRT-LLM 1.0.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mlacalc.timemodel.moe_backend import MOE_BACKEND_SETTING
from mlacalc.words.engines import check_engine
from mlacalc.words.errors import InvalidArgumentError, MlacalcError
from mlacalc.words.safeio import read_text

__all__ = [
    "ENGINES",
    "Deployment",
    "attention_groups_over_gpus",
    "checkpoint_path",
    "deployments",
    "launch_commands",
]

ENGINES = ("sglang", "vllm", "trtllm")


@dataclass(frozen=True)
class Deployment:
    """One pool of a planned deployment as an engine needs it."""

    gpus: int
    tp: int
    dp: int
    pp: int
    ep: int
    dp_attention: bool
    redundant_experts: int
    overlap: str
    kv_dtype: str
    #: running requests per attention group (the admitted batch)
    batch_per_group: int
    #: the pool's role in a disaggregated deployment ("" aggregated)
    role: str = ""
    gpus_per_node: int | None = None
    memory_fraction: float = 0.9
    max_tokens: int | None = None
    chunked_prefill: int | None = None
    cuda_graph_max_batch: int | None = None
    overlap_schedule: bool = True
    mtp_tokens: int = 0
    #: the experts' all-to-all on DeepEP (SGLang; NVIDIA GPUs only)
    deepep: bool = True
    #: the model's routed experts (TensorRT-LLM's load balancer counts its slots with them)
    routed_experts: int = 0
    #: tokens per KV page the plan assumed (None: the engine's default, left unsaid)
    page_size: int | None = None
    #: TensorRT-LLM's MoE backend the plan timed (None: its default, left unsaid;
    #: :mod:`mlacalc.timemodel.moe_backend`), its ``moe_config.backend``
    moe_backend: str | None = None

    @property
    def nodes(self) -> int:
        node = self.gpus_per_node or self.gpus
        return max(1, -(-self.gpus // node))


def share_words(share: float) -> str:
    """A memory share as the launch lines give it: to two decimals where that is the share
    (0.90), else every decimal it has, to 12 (0.8734, a converted share to the decimals
    :func:`mlacalc.serving.capacity.round_trip_share` chose): two decimals alone would size
    another cache than the plan's."""
    share = round(float(share), 12)  # 1 - 0.07 is 0.9299999999999999 in a float: 0.93
    return f"{share:.2f}" if round(share, 2) == share else repr(share)


def _kv(engine: str, kv: str) -> str | None:
    """The engine's name for a KV dtype (None: its default, the model's own dtype)."""
    if kv in ("bf16", "fp16"):
        return None
    if kv.startswith("fp8"):
        return "fp8_e4m3" if engine == "sglang" else "fp8"
    raise InvalidArgumentError(
        "kv_dtype",
        f"{kv!r} has no {engine} KV-cache option written here (launch commands carry bf16, fp16 "
        "and fp8 caches): plan without --launch, or with --kv-dtype fp8",
    )


def _nodes(d: Deployment, head: str, rank: str) -> list[str]:
    if d.nodes <= 1:
        return []
    return [head.format(n=d.nodes), rank]


def _sglang(model: str, d: Deployment) -> list[str]:
    w = ["python -m sglang.launch_server", f"--model-path {shlex.quote(model)}"]
    w.append(f"--tp {d.tp * d.dp}" if d.dp_attention else f"--tp {d.tp}")
    if d.dp > 1:
        w.append(f"--dp {d.dp}")
    if d.dp_attention and d.dp > 1:
        w.append("--enable-dp-attention")
        if d.tp == 1:
            # the plan holds the dense FFN whole on every GPU (split by the attention group's
            # tp, here 1), as SGLang's DP dense FFN does: the SGLang decode command of the
            # shared reference serving-figures.md, section 3.1 (the #6017 command, 96 H100),
            # passes --moe-dense-tp-size 1; without it SGLang splits it over all --tp GPUs
            w.append("--moe-dense-tp-size 1")
        # the plan splits the LM head over the attention group's tp, not the instance's: the
        # "DP LM head" of the same section 3.1 (its flag's name from recall of SGLang's
        # server_args.py: vocabulary parallel within the attention TP group)
        w.append("--enable-dp-lm-head")
    if d.pp > 1:
        w.append(f"--pp-size {d.pp}")
    if d.ep > 1:
        w += [f"--ep-size {d.ep}"] + (["--moe-a2a-backend deepep"] if d.deepep else [])
    if d.redundant_experts:
        w.append(f"--ep-num-redundant-experts {d.redundant_experts}")
    if d.overlap == "tbo":
        w.append("--enable-two-batch-overlap")
    kv = _kv("sglang", d.kv_dtype)
    if kv:
        w.append(f"--kv-cache-dtype {kv}")
    w += [
        f"--mem-fraction-static {share_words(d.memory_fraction)}",
        f"--max-running-requests {d.batch_per_group * d.dp}",  # the instance's, all groups
    ]
    if d.page_size:
        w.append(f"--page-size {d.page_size}")
    if d.max_tokens:
        w.append(f"--max-prefill-tokens {d.max_tokens}")
    if d.chunked_prefill:
        w.append(f"--chunked-prefill-size {d.chunked_prefill}")
    w.append(f"--cuda-graph-max-bs {d.cuda_graph_max_batch or d.batch_per_group}")
    if not d.overlap_schedule:
        w.append("--disable-overlap-schedule")
    if d.mtp_tokens:
        w += [
            "--speculative-algorithm EAGLE",
            f"--speculative-num-steps {d.mtp_tokens}",
            "--speculative-eagle-topk 1",
            f"--speculative-num-draft-tokens {d.mtp_tokens + 1}",
        ]
    if d.role:
        w.append(f"--disaggregation-mode {d.role}")
    return w + _nodes(d, "--nnodes {n} --dist-init-addr $HEAD:5000", "--node-rank $NODE_RANK")


def _vllm(model: str, d: Deployment) -> list[str]:
    w = ["vllm serve", shlex.quote(model), f"--tensor-parallel-size {d.tp}"]
    if d.dp > 1:
        w.append(f"--data-parallel-size {d.dp}")
    if d.pp > 1:
        w.append(f"--pipeline-parallel-size {d.pp}")
    if d.ep > 1:
        w.append("--enable-expert-parallel")  # EP over every GPU of the instance
        if d.redundant_experts:
            w += ["--enable-eplb", f"--num-redundant-experts {d.redundant_experts}"]
        if d.deepep:
            # the plan times the experts' exchange as DeepEP's kernels (low-latency for decode
            # rows, normal for prompt tokens), which is not vLLM's default all-to-all: its
            # backend by the environment variable of vLLM 0.10's envs.py (from recall; later
            # releases also take --all2all-backend); one backend a server, so an aggregated
            # server runs the low-latency kernels, the prefill pool the high-throughput ones
            mode = "high_throughput" if d.role == "prefill" else "low_latency"
            w[0] = f"VLLM_ALL2ALL_BACKEND=deepep_{mode} vllm serve"
    if d.overlap == "tbo":
        w.append("--enable-dbo")
    kv = _kv("vllm", d.kv_dtype)
    if kv:
        w.append(f"--kv-cache-dtype {kv}")
    w += [
        f"--gpu-memory-utilization {share_words(d.memory_fraction)}",
        f"--max-num-seqs {d.batch_per_group}",
    ]
    if d.page_size:
        w.append(f"--block-size {d.page_size}")
    budget = d.max_tokens or d.chunked_prefill
    if budget:
        w.append(f"--max-num-batched-tokens {budget}")
    if d.cuda_graph_max_batch:
        # the CompilationConfig key (from recall of vLLM's vllm/config/compilation.py, not
        # checked against a release): max_cudagraph_capture_size since vLLM 0.11; the older
        # max_capture_size was derived from the capture sizes, not a key one could set
        sizes = {"max_cudagraph_capture_size": d.cuda_graph_max_batch}
        w.append(f"--compilation-config {shlex.quote(json.dumps(sizes))}")
    if d.overlap_schedule:
        w.append("--async-scheduling")
    if d.mtp_tokens:
        spec = {"method": "deepseek_mtp", "num_speculative_tokens": d.mtp_tokens}
        w.append(f"--speculative-config {shlex.quote(json.dumps(spec))}")
    if d.role:
        conn = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
        w.append(f"--kv-transfer-config {shlex.quote(json.dumps(conn))}")
    local = _vllm_local_ranks(d)
    if local:  # data-parallel ranks over nodes, each node its own (its rank: $NODE_RANK)
        last = d.dp - (d.nodes - 1) * local  # the last node's, fewer where it is not full
        here = str(local) if last == local else f"$((NODE_RANK < {d.nodes - 1} ? {local} : {last}))"
        w += [
            f"--data-parallel-size-local {here}",
            "--data-parallel-address $HEAD",
            f"--data-parallel-start-rank $((NODE_RANK * {local}))",
        ]
    elif d.nodes > 1:  # one rank's GPUs span nodes: one server over a Ray cluster of them
        w.append("--distributed-executor-backend ray")
    return w


def _vllm_local_ranks(d: Deployment) -> int:
    """vLLM's data-parallel ranks on each node of a pool over several nodes, where its ranks
    (``tp x pp`` GPUs each) fill whole nodes (0 otherwise: one server on a Ray cluster). From
    recall of vLLM's data-parallel deployment docs, not a shared table: each node runs
    ``vllm serve`` with ``--data-parallel-size-local`` ranks from ``--data-parallel-start-rank``,
    the nodes past the head with ``--headless``; a tensor- or pipeline-parallel group wider
    than a node runs on Ray (``--distributed-executor-backend ray``), started on the head.
    A last node the pool does not fill runs fewer (12 ranks of one GPU on 8-GPU nodes: 8,
    then 4), which :func:`_vllm` writes as one ``$NODE_RANK`` formula."""
    node, rank = d.gpus_per_node or d.gpus, d.tp * d.pp
    if d.nodes <= 1 or d.dp <= 1 or rank > node or node % rank:
        return 0
    local = node // rank
    if not 0 < d.dp - (d.nodes - 1) * local <= local:  # not the ranks these nodes hold
        return 0
    return local


def _nodes_words(engine: str, d: Deployment) -> str:
    """How a pool over several nodes is started, beside its command (its nodes)."""
    if engine == "vllm" and not _vllm_local_ranks(d):
        return (
            f" (on the head node of a Ray cluster of its {d.nodes} nodes: `ray start --head` "
            "there, `ray start --address $HEAD:6379` on the others, first)"
        )
    if engine == "vllm":
        return (
            f" (run on each of its {d.nodes} nodes with its NODE_RANK, 0 on the head node "
            "$HEAD; the others add --headless)"
        )
    if engine == "trtllm":  # mpirun starts every rank itself, over the hostfile's nodes
        return (
            f" (run once, on one of its {d.nodes} nodes: mpirun starts a rank a GPU on each "
            "node $HOSTFILE lists; the options file where every node reads it)"
        )
    return f" (run on each of its {d.nodes} nodes)"


def _trtllm(model: str, d: Deployment) -> list[str]:
    extra: dict[str, Any] = {"enable_attention_dp": bool(d.dp_attention and d.dp > 1)}
    kv = _kv("trtllm", d.kv_dtype)
    extra["kv_cache_config"] = {"free_gpu_memory_fraction": float(share_words(d.memory_fraction))}
    if kv:
        extra["kv_cache_config"]["dtype"] = kv
    if d.page_size:
        extra["kv_cache_config"]["tokens_per_block"] = d.page_size
    if d.chunked_prefill:
        extra["enable_chunked_prefill"] = True
    extra["cuda_graph_config"] = {
        "enable_padding": True,
        "max_batch_size": d.cuda_graph_max_batch or d.batch_per_group,
    }
    if not d.overlap_schedule:
        extra["disable_overlap_scheduler"] = True
    if d.mtp_tokens:
        extra["speculative_config"] = {
            "decoding_type": "MTP",
            "num_nextn_predict_layers": d.mtp_tokens,
        }
    if d.redundant_experts:
        # the load balancer's slots are every expert's, the replicas included (288 for
        # DeepSeek-V3's 256 and 32 redundant), as recalled from TensorRT-LLM's wide-EP
        # examples; not the replicas alone
        if not d.routed_experts:
            raise InvalidArgumentError(
                "routed_experts",
                "TensorRT-LLM's load balancer counts every expert's slot: give the model's "
                "routed experts with the redundant ones",
            )
        slots = d.routed_experts + d.redundant_experts
        extra["moe_config"] = {"load_balancer": {"num_slots": slots}}
    if d.moe_backend:  # the MoE kernels the plan timed (moe_config.backend, from recall)
        extra.setdefault("moe_config", {})["backend"] = MOE_BACKEND_SETTING[d.moe_backend]
    if d.overlap == "tbo":
        extra["enable_two_batch_overlap"] = True  # recent releases; older ones lack it
    tp = d.tp * d.dp if d.dp_attention else d.tp
    options = f"extra-{d.role or 'server'}.yml"
    w = [
        f"cat > {options} <<'EOF'\n{_attention_dp_comment(d)}{_yaml(extra)}EOF\n",
        "trtllm-serve",
        shlex.quote(model),
        "--backend pytorch",
        f"--tp_size {tp}",
        f"--ep_size {d.ep}",
        f"--pp_size {d.pp}",
        f"--max_batch_size {d.batch_per_group}",
    ]
    if d.max_tokens or d.chunked_prefill:
        w.append(f"--max_num_tokens {d.max_tokens or d.chunked_prefill}")
    w.append(f"--extra_llm_api_options {options}")
    if d.nodes > 1:  # one server over several nodes: started through MPI
        w.insert(1, f"mpirun -n {d.gpus} --hostfile $HOSTFILE trtllm-llmapi-launch")
    return w


def attention_groups_over_gpus(layout: Any) -> bool:
    """Whether a layout or a pool (anything with ``dp_attention``, ``tp`` and ``dp``: a
    :class:`~mlacalc.serving.layout.Layout`, a :class:`Deployment`) runs DP-attention in
    several attention groups of two or more GPUs each: SGLang's and vLLM's, which
    TensorRT-LLM's enable_attention_dp does not run (it runs attention on one GPU a group,
    from recall)."""
    return bool(layout.dp_attention) and layout.tp > 1 and layout.dp > 1


def _attention_dp_comment(d: Deployment) -> str:
    """A comment line atop TensorRT-LLM's options file where the point's attention groups span
    several GPUs (:func:`attention_groups_over_gpus`): this starts TP1 DP-attention over every
    GPU, not the layout timed (:func:`~mlacalc.serving.plan_checks.trtllm_attention_tp` warns
    of it)."""
    if not attention_groups_over_gpus(d):
        return ""
    return (
        f"# enable_attention_dp runs attention TP1 over these {d.tp * d.dp} GPUs, not the "
        f"TP{d.tp} DP-attention{d.dp} timed\n"
    )


def _yaml(doc: dict[str, Any], indent: int = 0) -> str:
    """A small YAML writer for the options file (nested dicts, scalars)."""
    out = []
    for key, value in doc.items():
        pad = "  " * indent
        if isinstance(value, dict):
            out.append(f"{pad}{key}:\n{_yaml(value, indent + 1)}")
        else:
            text = str(value).lower() if isinstance(value, bool) else str(value)
            out.append(f"{pad}{key}: {text}\n")
    return "".join(out)


_BUILDERS = {"sglang": _sglang, "vllm": _vllm, "trtllm": _trtllm}
_ROUTERS = {
    "sglang": "python -m sglang_router.launch_router --pd-disaggregation "
    "--prefill http://$PREFILL:30000 --decode http://$DECODE:30000",
    "vllm": "# a proxy that sends each request to the prefill server, then the decode server "
    "(vLLM's disaggregated-serving proxy example)",
    "trtllm": "trtllm-serve disaggregated -c disagg-config.yml  "
    "# its context_servers: the prefill server, generation_servers: the decode server",
}


def _replicas(engine: str, d: Deployment) -> int:
    """The servers a pool of ``dp`` independent replicas (no DP-attention) is launched as on
    ``engine``: one (its own data parallelism) where the engine runs replicas apart, SGLang's
    ``--dp`` and vLLM's ``--data-parallel-size`` of a dense model; ``dp`` where it cannot:
    TensorRT-LLM's server has no data parallelism of replicas, and vLLM's data-parallel ranks
    of a MoE model share the experts (its expert layers form a DP x TP group, or EP over
    it; from recall of vLLM's data-parallel deployment docs), which is DP-attention, not the
    replicas the plan times."""
    if d.dp <= 1 or d.dp_attention:
        return 1
    if engine == "trtllm" or (engine == "vllm" and d.routed_experts):
        return d.dp
    return 1


def launch_commands(engine: str, model: str, pools: list[Deployment]) -> list[tuple[str, str]]:
    """``(what, command)`` for each pool of a deployment (one aggregated pool, or a
    disaggregated prefill and decode pool and the router in front of them), on ``engine``."""
    engine = check_engine(engine)  # any case; anything else is refused naming the engines
    out = []
    for d in pools:
        what = f"{d.role} pool" if d.role else "server"
        replicas = _replicas(engine, d)
        if replicas > 1:
            d = replace(d, gpus=d.gpus // replicas, dp=1)
            what += (
                f" (one per replica: run {replicas}, each on its own {d.gpus} GPUs, a load "
                "balancer in front)"
            )
        if d.nodes > 1:
            what += _nodes_words(engine, d)
        words = _BUILDERS[engine](model, d)
        # an options file written first (TensorRT-LLM) stands on its own lines
        first = words[0] if words[0].endswith("\n") else ""
        out.append((what, first + " ".join(words[1:] if first else words)))
    if any(d.role for d in pools):
        out.append(("router", _ROUTERS[engine]))
    return out


def deployments(
    point: dict[str, Any],
    gpus_per_node: int | None,
    memory_reserve: float,
    prompts_per_pass: int,
    **settings: Any,
) -> list[Deployment]:
    """The pools of a search point (or of the same fields of a plan): the decode pool (the
    only one, aggregated) and, disaggregated, the prefill pool first, running up to
    ``prompts_per_pass`` prompts per group; ``settings``: the engine's options
    (``max_tokens``, ``chunked_prefill``, ``cuda_graph_max_batch``, ``overlap_schedule``,
    ``mtp_tokens``, ``page_size``: the plan's tokens per KV page, said to the engine:
    SGLang's ``--page-size``, vLLM's ``--block-size``, TensorRT-LLM's
    ``kv_cache_config.tokens_per_block``; ``memory_fraction`` the engine's memory setting,
    ``prefill_memory_fraction`` the prefill pool's where it differs)."""
    share = settings.pop("memory_fraction", None)  # the engine's own setting, where given
    # the prefill pool's own (TensorRT-LLM's share is of what each pool's weights leave)
    p_share = settings.pop("prefill_memory_fraction", None)
    p_share = share if p_share is None else p_share
    common = dict(
        gpus_per_node=gpus_per_node,
        memory_fraction=1.0 - memory_reserve if share is None else share,
    )
    if settings.get("overlap_schedule", True) is None:  # no engine's defaults: on, as planned
        settings["overlap_schedule"] = True
    disaggregated = point.get("mode") == "disaggregated"
    decode = Deployment(
        gpus=point["decode_gpus"],
        tp=point["tp"],
        dp=point["dp"],
        pp=point["pp"],
        ep=point["ep"],
        dp_attention=point["dp_attention"],
        redundant_experts=point["redundant_experts"],
        overlap=point["overlap"],
        kv_dtype=point["kv_dtype"],
        batch_per_group=int(point["batch_per_group"]),
        role="decode" if disaggregated else "",
        **common,
        **settings,
    )
    if not disaggregated:
        return [decode]
    p_gpus, p_tp = point["prefill_gpus"], point["prefill_tp"]
    prefill = Deployment(
        gpus=p_gpus,
        tp=p_tp,
        dp=p_gpus // p_tp,
        pp=1,
        ep=point["prefill_ep"],
        dp_attention=bool(point["prefill_dp_attention"]),
        redundant_experts=point["prefill_redundant_experts"],
        overlap=point["overlap"],
        kv_dtype=point["kv_dtype"],
        batch_per_group=prompts_per_pass,
        role="prefill",
        **{**common, "memory_fraction": 1.0 - memory_reserve if p_share is None else p_share},
        **{k: v for k, v in settings.items() if k != "mtp_tokens"},
    )
    return [prefill, decode]


#: where a shipped model's sources name the Hugging Face repository its config.json came from:
#: a copy named ``org--repo_config.json`` (the Hub's ``org/repo`` with ``--``), a line opening
#: on ``org/repo config.json`` (after ``Hugging Face`` or ``HF config``), or the repository a
#: line quotes as its ``_name_or_path`` or ``checkpoint``
_REPO = r"([A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*[A-Za-z0-9])"
_SOURCE_REPO = (
    re.compile(r"([A-Za-z0-9][\w.-]*)--([A-Za-z0-9][\w.-]*?)_config\.json"),
    re.compile(rf"^(?:Hugging Face |HF )?{_REPO} config\.json"),
    re.compile(rf"\b_name_or_path (?:\.\.\./)?{_REPO}"),
    re.compile(rf"\bcheckpoint {_REPO}"),
)


def checkpoint_path(m: Any) -> tuple[str, str]:
    """What ``--model-path`` of the launch commands loads for ``m`` when none is given, and a
    sentence where it is a guess or a placeholder (``""`` where it is the repository's id):
    a shipped model's Hugging Face repository as its sources name it; a config file's
    ``_name_or_path``, else the folder of a ``config.json`` (a downloaded checkpoint's), else
    the ``org--repo`` its file name writes; else ``<checkpoint of NAME>``, to be filled."""
    origin = Path(str(getattr(m, "origin", "") or ""))
    if origin.suffix == ".json":
        try:
            data = json.loads(read_text(origin))
        except (MlacalcError, ValueError):
            data = {}
        given = data.get("_name_or_path") if isinstance(data, dict) else None
        if isinstance(given, str) and given.strip():
            return given.strip(), ""
        if origin.name == "config.json":
            return str(origin.parent), ""
        stem = origin.name.removesuffix(".json").removesuffix(".config")
        if "--" in stem:
            org, _, repo = stem.partition("--")
            return f"{org}/{repo}", (
                f"--model-path {org}/{repo} is read from the config's file name "
                f"({origin.name}); give --model-path if that is not the repository"
            )
    else:
        for line in getattr(m, "source", ()):
            for pattern in _SOURCE_REPO:
                found = pattern.search(str(line))
                if found:
                    return "/".join(found.groups()), ""
    slot = f"<checkpoint of {m.name}>"
    return slot, (
        f"{slot} stands for the checkpoint to load (a Hugging Face repository id or a local "
        f"folder): mlacalc knows none for {m.label}; replace it, or give --model-path"
    )
