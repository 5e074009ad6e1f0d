"""The engine's scheduler around the GPU's step: its host work per step, whether that work
overlaps the GPU's, CUDA graphs for decode, and what the engine admits (running requests and
tokens per step), with each engine's published defaults.

**Host work.** Each step the engine's CPU schedules the batch, prepares its inputs and reads
the sampled tokens back: ``host_step_s`` per step plus ``host_per_sequence_s`` per sequence in
it, and, for a step the GPU does not replay from a CUDA graph, ``launch_s`` per kernel launched
(a decode step of at most ``cuda_graph_max_batch`` tokens per GPU is captured: one launch).
Without overlap scheduling the GPU waits for it: a step takes ``gpu + host``. With it (SGLang's
and TensorRT-LLM's overlap scheduler, vLLM's asynchronous scheduling) the CPU prepares step
``n + 1`` while the GPU runs step ``n``: a step takes ``max(gpu, host)``.

**Admission.** ``max_running`` caps the requests running at once (the batch the engine admits,
below what memory holds or not: the plan says which binds), ``max_tokens`` the tokens one
step carries (decode tokens and prompt tokens together, as vLLM's ``max_num_batched_tokens``
and TensorRT-LLM's ``max_num_tokens`` count them): a whole prompt joins a step only where it
fits, a chunk is at most what the decode tokens leave.

:data:`ENGINE_DEFAULTS` holds each engine's defaults as its server documents them. The host
times are not among them: no engine publishes its own. One published pair bounds SGLang's on
one deployment (LMSYS, 2025-07-17: DeepSeek-V3 on 16 H200, 2 requests per rank, 51.0 output
tokens/s per rank without overlap scheduling and 60.4 with it): the step the overlap hides is
``2 / 51.0 - 2 / 60.4 = 6.1 ms`` there, a figure of that scale and batch only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.models.loading import model_argument
from mlacalc.timemodel.device import device_figures
from mlacalc.words.defaults import PAGE_SIZE
from mlacalc.words.engines import ENGINE_LABELS, check_engine, default_engine_words

__all__ = [
    "ENGINE_DEFAULTS",
    "EngineDefaults",
    "Scheduler",
    "defaults_words",
    "engine_page_size",
    "engine_settings",
    "model_page_size",
    "overlap_idle_note",
    "runs_flashmla",
    "unnamed_engine_note",
    "with_engine_defaults",
]


@dataclass(frozen=True)
class Scheduler:
    """The host side of a step (see the module docstring). The defaults leave the GPU's step
    as it is: no host time, overlap on, every step's launches free."""

    host_step_s: float = 0.0
    host_per_sequence_s: float = 0.0
    overlap: bool = True
    #: decode steps of at most this many tokens per attention group replay a CUDA graph
    #: (None: every decode step does)
    cuda_graph_max_batch: int | None = None
    #: host seconds per kernel launched outside a CUDA graph
    launch_s: float = 0.0

    @property
    def idle(self) -> bool:
        """Whether the scheduler adds nothing to any step."""
        return not (self.host_step_s or self.host_per_sequence_s or self.launch_s)

    def host_seconds(
        self, sequences: np.ndarray, tokens: np.ndarray, decode: np.ndarray, launches: int
    ) -> np.ndarray:
        """The host's seconds for steps of ``sequences`` sequences and ``tokens`` tokens per
        group; ``decode``: the rows without prompt tokens; ``launches``: kernels in a step."""
        cap = self.cuda_graph_max_batch
        graph = decode & (np.asarray(tokens) <= (np.inf if cap is None else cap))
        launch = np.where(graph, self.launch_s, launches * self.launch_s)
        return self.host_step_s + self.host_per_sequence_s * sequences + launch

    def step_seconds(self, gpu: np.ndarray, host: np.ndarray) -> np.ndarray:
        """A step with the host's work: after the GPU's, or beside it (overlap)."""
        return np.maximum(gpu, host) if self.overlap else gpu + host


#: What is said where overlap scheduling is asked with no host time to hide (a new-user trial:
#: DeepSeek-V3 on 16 H200 under SGLang, 22.47 ms a step with and without it, no word)
OVERLAP_IDLE = (
    "overlap scheduling (overlap_schedule, --overlap-schedule / --no-overlap-schedule) changes "
    "nothing here: overlap hides the host's step time, which is 0 ms unless --host-step-ms is "
    "given (host_step_s; --host-per-sequence-ms and --launch-us add host time too); no host "
    "time is assumed"
)


def overlap_idle_note(asked: bool | None, scheduler: Scheduler | None) -> tuple[str, ...]:
    """:data:`OVERLAP_IDLE` where overlap scheduling was asked (on or off: ``asked`` not None)
    and the scheduler (None: none, no host work) has no host work for it to hide or expose."""
    idle = scheduler is None or scheduler.idle
    return (OVERLAP_IDLE,) if asked is not None and idle else ()


@dataclass(frozen=True)
class EngineDefaults:
    """An engine's published scheduler defaults on a datacenter GPU of 80 GB or more."""

    name: str
    version: str
    #: requests running at once (None: as many as the KV cache holds)
    max_running: int | None
    #: tokens one step carries (None: no cap beyond the prefill pass's)
    max_tokens: int | None
    #: prompt tokens per chunk (None: chunked prefill off by default)
    chunked_prefill: int | None
    overlap: bool
    cuda_graph_max_batch: int | None
    source: str
    #: whether the overlap scheduler stays on with speculative decoding (MTP drafts): the
    #: verify step's accepted tokens are read back before the next step is scheduled, so an
    #: engine may turn it off (None: not known; the overlap setting stands)
    overlap_with_drafts: bool | None = None
    #: tokens per KV page, the unit its prefix cache matches whole (:func:`engine_page_size`)
    page_size: int = 16
    #: the page size of an MLA model where its default attention backend requires another
    mla_page_size: int | None = None
    #: the page size of a DSA model (its sparse attention backend's)
    dsa_page_size: int | None = None
    #: whether that DSA page is FlashMLA's (sparse FlashMLA), so holds only where FlashMLA
    #: runs (:func:`runs_flashmla`); elsewhere the model is paged as an MLA model
    dsa_page_flashmla: bool = False
    #: the page size of an MLA model on datacenter Blackwell (compute capability 10.x), where
    #: the engine's default MLA backend there requires another
    blackwell_mla_page_size: int | None = None


#: Each engine's defaults as its server's argument defaults give them at the version named,
#: recalled from the engines' argument parsers at those versions (no copy of them is vendored
#: here: check them against the version you run); several depend on the GPU's memory, those
#: for 80 GB and more are listed.
ENGINE_DEFAULTS = {
    "sglang": EngineDefaults(
        name="sglang",
        version="0.4.9",
        max_running=None,
        max_tokens=16384,  # --max-prefill-tokens
        chunked_prefill=8192,  # --chunked-prefill-size on 80 GB-class GPUs
        overlap=True,  # overlap scheduler on unless --disable-overlap-schedule
        cuda_graph_max_batch=160,  # --cuda-graph-max-bs
        source="sglang python/sglang/srt/server_args.py",
        # "Overlap scheduler is disabled because of using eagle speculative decoding"
        overlap_with_drafts=False,
        # --page-size (ServerArgs.page_size): 1, the radix cache matching token by token
        # (from recall; its FlashMLA backend needs 64, not its default on Hopper: FA3); a DSA
        # model's NSA backend sets 64, and on datacenter Blackwell the default MLA backend
        # (TensorRT-LLM's MLA kernels, trtllm_mla) takes 32 or 64 and sets 64 (server_args.py,
        # from recall)
        page_size=1,
        dsa_page_size=64,
        blackwell_mla_page_size=64,
    ),
    "vllm": EngineDefaults(
        name="vllm",
        version="0.10",
        max_running=1024,  # --max-num-seqs (V1 engine, GPUs of 70 GiB and more)
        max_tokens=8192,  # --max-num-batched-tokens (online server)
        chunked_prefill=8192,  # chunked prefill always on in V1: the token budget
        overlap=False,  # --async-scheduling is opt-in
        cuda_graph_max_batch=512,  # the largest captured size
        source="vllm vllm/engine/arg_utils.py (_set_default_args_v1), config cudagraph sizes",
        # --block-size (CacheConfig.block_size): 16 on CUDA; an MLA model's default backend,
        # FlashMLA, forces 64 (vllm/platforms/cuda.py's check_and_update_config, from
        # recall) where FlashMLA runs (compute capability 9.x, 10.x: runs_flashmla; its
        # other MLA backends keep 16, from recall); on datacenter Blackwell its default MLA
        # backend is CUTLASS MLA, which forces 128 (the same check, from recall); a DSA
        # model's sparse FlashMLA backend forces 64 on either (from recall), so only where
        # FlashMLA runs: elsewhere (MI300X, MI355X) a DSA model is paged as an MLA one, 16
        page_size=16,
        mla_page_size=64,
        dsa_page_size=64,
        dsa_page_flashmla=True,
        blackwell_mla_page_size=128,
    ),
    "trtllm": EngineDefaults(
        name="trtllm",
        version="1.0",
        max_running=2048,  # --max_batch_size
        max_tokens=8192,  # --max_num_tokens
        chunked_prefill=None,  # enable_chunked_prefill off by default
        overlap=True,  # overlap scheduler on unless disable_overlap_scheduler
        cuda_graph_max_batch=None,  # cuda_graph_config: the batch sizes given
        source="TensorRT-LLM tensorrt_llm/llmapi/llm_args.py, trtllm-serve options",
        # kv_cache_config.tokens_per_block (KvCacheConfig, llm_args.py): 32 (from recall)
        page_size=32,
    ),
}


def defaults_words(engine: str, chunked: str | None = None) -> str:
    """An engine's scheduler defaults in words, as the CLI and the app say them, with the
    version of the engine they were read from (``as documented at SGLang 0.4.9 (max running
    ...)``: not the version its kernel tables were measured on, which the output says apart);
    ``chunked`` replaces what is said of its chunked prefill (a search's, a disaggregated
    plan's)."""
    d = ENGINE_DEFAULTS[engine]

    def tok(v: int | None, none: str) -> str:
        return none if v is None else f"{v:,}"

    drafts = ", off with MTP drafts" if d.overlap and d.overlap_with_drafts is False else ""
    return (
        f"as documented at {ENGINE_LABELS.get(engine, engine)} {d.version} (max running "
        f"{tok(d.max_running, 'what fits')}, max tokens "
        f"{tok(d.max_tokens, 'no cap')}, chunked prefill "
        f"{chunked or tok(d.chunked_prefill, 'off')}, CUDA graphs to "
        f"{tok(d.cuda_graph_max_batch, 'every batch')}, overlap scheduling "
        f"{'on' if d.overlap else 'off'}{drafts})"
    )


def engine_settings(engine: str, drafts: int | None = 0) -> dict[str, object]:
    """The :func:`mlacalc.plan` arguments of an engine's scheduler defaults
    (:data:`ENGINE_DEFAULTS`): ``plan(..., **engine_settings("vllm"))``; ``drafts``: the MTP
    draft tokens a step verifies (an engine that turns its overlap scheduler off under
    speculative decoding runs without it); the engine's name in any case."""
    d = ENGINE_DEFAULTS[check_engine(engine)]
    overlap = d.overlap
    if drafts and d.overlap_with_drafts is not None:
        overlap = overlap and d.overlap_with_drafts
    return {
        "max_running": d.max_running,
        "max_tokens": d.max_tokens,
        "chunked_prefill": d.chunked_prefill,
        "overlap_schedule": overlap,
        "cuda_graph_max_batch": d.cuda_graph_max_batch,
    }


def engine_page_size(
    engine: str | None,
    mla: bool = False,
    dsa: bool = False,
    blackwell: bool = False,
    flashmla: bool = True,
) -> int:
    """Tokens per KV page an engine's server runs by default (:data:`ENGINE_DEFAULTS`: SGLang
    1, 64 for a DSA model and for an MLA model on datacenter Blackwell (``blackwell``:
    compute capability 10.x), vLLM 16 (64 for an MLA model, FlashMLA's, and a DSA model; 128
    for an MLA model on datacenter Blackwell, CUTLASS MLA's), TensorRT-LLM 32), the
    page a plan's KV memory and its prefix cache's whole pages count in; ``engine`` None:
    :data:`mlacalc.words.defaults.PAGE_SIZE` (16). ``flashmla``: whether FlashMLA runs on
    the device (NVIDIA compute capability 9.x or 10.x); where it does not (A100, L40S,
    MI300X) vLLM's other MLA backends page an MLA model by its 16 (from recall), and a DSA
    model too (its 64 is sparse FlashMLA's)."""
    if engine is None:
        return PAGE_SIZE
    d = ENGINE_DEFAULTS[check_engine(engine)]
    for applies, page in (
        (dsa and (flashmla or not d.dsa_page_flashmla), d.dsa_page_size),
        (mla and blackwell, d.blackwell_mla_page_size),
        (mla and flashmla, d.mla_page_size),
    ):
        if applies and page:
            return page
    return d.page_size


def model_page_size(engine: str | None, m: Any, hw: Any) -> int:
    """:func:`engine_page_size` of a model on a device: its MLA and DSA attention, and whether
    the device is datacenter Blackwell (:attr:`DeviceFigures.tcgen05`, the time model's own
    test, a capability read from the architecture where the file gives none), and whether
    FlashMLA runs there (:func:`runs_flashmla`). ``m``: a :class:`~mlacalc.ModelConfig` or
    what :func:`mlacalc.load_model` takes; ``hw``: a :class:`~mlacalc.HardwareSpec` or what
    :func:`mlacalc.load_hardware` takes."""
    m, hw = model_argument(m), load_hardware(hw)
    dev = device_figures(hw)
    dsa = m.index_topk is not None
    return engine_page_size(engine, m.is_mla, dsa, dev.tcgen05, runs_flashmla(dev))


def runs_flashmla(dev: Any) -> bool:
    """Whether FlashMLA (DeepSeek's MLA decode kernels) runs on a device's figures
    (:class:`~mlacalc.timemodel.device.DeviceFigures`): NVIDIA compute capability 9.x (Hopper)
    or 10.x (datacenter Blackwell) only, from recall of its build targets; not on A100 (8.0),
    L40S (8.9), consumer Blackwell (12.x) or another vendor's GPU (MI300X)."""
    cc = dev.compute_capability
    return dev.vendor.lower() in ("", "nvidia") and 9.0 <= cc < 11.0


def unnamed_engine_note(
    engine: str,
    given: dict[str, Any],
    m: Any,
    hw: Any,
    page_size: int,
    chunked: bool,
    kernels_of: str | None = None,
) -> str:
    """The words of a plan or search that named no engine and took no engine's defaults:
    ``engine`` (the default) times the kernels, its scheduler defaults are not applied, and
    naming it (``--engine``, ``engine=``) would set each of its settings ``given`` left out
    (None), the chunked prefill only where it runs (``chunked``), and its page where it differs
    from ``page_size``. ``kernels_of``: the engine whose kernels timed the plan (its profile's);
    where another engine's stand in for the default's (no SGLang profile fits an MI300X) the
    words say so rather than "its kernels timed"."""
    filled = [
        f"{name} {_setting_words(value)}"
        for name, value in engine_settings(engine, given.get("mtp_tokens")).items()
        if given.get(name) is None and value is not None
        and (name != "chunked_prefill" or chunked)
    ]  # fmt: skip
    page = model_page_size(engine, m, hw)
    if given.get("page_size") is None and page != page_size:
        filled.append(f"page_size {page} (here {page_size})")
    what = f", setting {', '.join(filled)}" if filled else ""
    kernels = (
        f"{kernels_of}'s kernels standing in for its own and its scheduler defaults not applied"
        if kernels_of and kernels_of != engine
        else "its kernels timed but not its scheduler defaults"
    )
    return (
        f"{default_engine_words(hw)}, {kernels}: --engine "
        f"{engine} (engine='{engine}') applies them{what}"
    )


def _setting_words(value: Any) -> str:
    """A scheduler setting's value in words: on / off, a count with thousands separators."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:,}" if isinstance(value, int) else str(value)


def with_engine_defaults(args: dict[str, Any]) -> dict[str, Any]:
    """:func:`mlacalc.plan`'s arguments (``args``) with the scheduler defaults of the engine
    ``engine_defaults`` names (None: ``engine``'s, if one is given; ``"none"``: no engine's)
    where an argument was left out (None), as ``mlacalc plan --engine`` fills its options left
    out, so that one question gets one answer from the API and the CLI: the chunked prefill
    only where it runs (a request mix served aggregated). Adds ``scheduler_defaults`` (the
    engine whose defaults were taken, or None) and ``scheduler_defaults_applied`` (each
    argument filled and its value)."""
    out = dict(args)
    who = out.get("engine_defaults")
    if who is None:
        who = out.get("engine")
    elif not (isinstance(who, str) and who.strip().lower() == "none"):
        who = check_engine(who, name="engine_defaults")
    applied: dict[str, Any] = {}
    if who is not None and not (isinstance(who, str) and who.strip().lower() == "none"):
        who = check_engine(who)
        runs_chunks = out.get("isl") is not None and out.get("mode") != "disaggregated"
        for name, value in engine_settings(who, out.get("mtp_tokens")).items():
            if out.get(name) is None and (name != "chunked_prefill" or runs_chunks):
                out[name] = applied[name] = value
    else:
        who = None
    if out.get("overlap_schedule") is None:  # no engine's: on, the step as the GPU runs it
        out["overlap_schedule"] = True
    out["scheduler_defaults"] = who
    out["scheduler_defaults_applied"] = applied
    return out
