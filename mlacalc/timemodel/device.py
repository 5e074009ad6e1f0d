"""Datasheet figures of a device, as the kernel time model uses them.

Every parameter of a calibration profile is relative to one of these figures (a fraction of
the tensor rate, of the HBM bandwidth, of the L2 size, of the scale-up link bandwidth), so a
profile fitted on measured devices predicts any device from its catalogue entry. Figures come
from the hardware catalogue (:mod:`mlacalc.hardware.catalogue`, the one source of a device's
figures); where an entry lacks one, an assumption (:data:`ASSUMED`) stands in and is listed
in :attr:`DeviceFigures.fallbacks` (and in the notes of a profile fitted on the device), as is
every figure the file itself lists as ``assumed`` (another device's figure standing in).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlacalc.hardware.catalogue import HardwareSpec, lookup_peak
from mlacalc.words.errors import MlacalcError

__all__ = ["ASSUMED", "ASSUMED_KEYS", "DeviceFigures", "device_figures", "mla_decode_kernel"]

#: Assumptions for a figure a device's catalogue file does not give (no datasheet figure, or a
#: user's file without it): figure -> (value, what is assumed).
ASSUMED: dict[str, tuple[float, str]] = {
    "l2_bytes": (40 * 2**20, "no L2 figure for this device: 40 MB assumed"),
    "link_bytes_per_s": (32e9, "no link figure for this device: PCIe Gen4 x16 assumed"),
    "link_latency_s": (
        5e-6,
        "no link latency for this device: 5 us assumed (PCIe peer-to-peer, a typical order of "
        "magnitude; no datasheet figure)",
    ),
    "sm_count": (108, "no SM count for this device: 108 assumed"),
    "clock_hz": (1.83e9, "no clock for this device: 1830 MHz (H100 SXM's) assumed"),
    "link_multicast": (0.0, "no in-switch reduction figure for this device: none assumed"),
}

_ATTRS = {
    # figure -> (HardwareSpec attribute candidates, scale to the model's unit)
    "l2_bytes": (("l2_bytes", "l2_mib"), (1.0, 2**20)),
    "link_bytes_per_s": (("scale_up_bytes_per_s", "scale_up_gb_per_s"), (1.0, 1e9)),
    "link_latency_s": (("scale_up_latency_s", "scale_up_latency_us"), (1.0, 1e-6)),
    "sm_count": (("sm_count",), (1.0,)),
    "clock_hz": (("boost_clock_hz", "boost_clock_mhz"), (1.0, 1e6)),
    "link_multicast": (("scale_up_multicast",), (1.0,)),
}


#: the YAML keys a hardware file may list as ``assumed`` -> the figure of this module they give
ASSUMED_KEYS = {
    "l2_mib": "l2_bytes",
    "scale_up_gb_per_s": "link_bytes_per_s",
    "scale_up_latency_us": "link_latency_s",
    "sm_count": "sm_count",
    "boost_clock_mhz": "clock_hz",
    "scale_up_mesh_link_gb_per_s": "mesh_link_bytes_per_s",
}


@dataclass(frozen=True)
class DeviceFigures:
    """The datasheet figures of one device the time model reads, with where each came from."""

    name: str
    kind: str
    peaks: dict[str, float]
    hbm_bytes_per_s: float
    sm_count: int
    l2_bytes: float
    link_bytes_per_s: float
    link_latency_s: float
    clock_hz: float = 1.83e9
    #: 1 where the scale-up switch reduces in the fabric (NVLink SHARP), else 0
    link_multicast: float = 0.0
    #: one point-to-point link's rate each way where the scale-up fabric is a full mesh (AMD's
    #: Infinity Fabric): a group of n GPUs has n - 1 of them (``HardwareSpec.
    #: scale_up_bandwidth``); 0: a switch, every group gets ``link_bytes_per_s``
    mesh_link_bytes_per_s: float = 0.0
    fallbacks: tuple[str, ...] = ()
    #: the catalogue's architecture name, and an NVIDIA GPU's CUDA compute capability (0 for
    #: any other device, or one whose file gives neither it nor a known NVIDIA architecture
    #: name): which kernels a library builds for it (see :attr:`tensor_core_generation`)
    architecture: str = ""
    compute_capability: float = 0.0
    vendor: str = ""
    _peaks_by_dtype: dict[str, float] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    @property
    def tensor_core_generation(self) -> str:
        """The one rule by which the time model picks the kernels a device runs where the
        measured tables show two generations' kernels differ:

        - ``"sm80"``: NVIDIA compute capability 8.x (Ampere: A100; Ada: L40S, RTX 40xx) and
          12.x (consumer and workstation Blackwell, RTX 50xx and the RTX PRO 6000, without the
          data-centre parts' large MMAs):
          per-warp ``mma.sync`` tiles of 16 query rows, as the measured A100 kernels;
        - ``"sm90"``: NVIDIA compute capability 9.x and 10.x-11.x (Hopper: H100, H200, H800;
          data-centre Blackwell: B200, B300, GB200, GB300): warp-group MMAs of 64 rows and TMA,
          as the measured H100 kernels (TensorRT-LLM's fp8-cache XQA decode, FlashMLA,
          FlashAttention-3); Blackwell takes Hopper's tile rules, the nearer generation (B200's
          own tables fit its parameters: ``fit-b200-sxm``), but for the terms :attr:`tcgen05`
          and :func:`~mlacalc.timemodel.shared.operand_reuse` change;
        - ``"other"``: any other vendor (MI300X), or a device whose file gives no capability:
          the large-tile rules of ``sm90`` where a kernel's tile shape is concerned, the
          other kernels' rules where a Hopper-only kernel is concerned (the fp8-cache XQA
          decode), all unvalidated."""
        cc = self.compute_capability
        if self.vendor.lower() not in ("", "nvidia") or cc <= 0.0:
            return "other"
        return "sm90" if 9.0 <= cc < 12.0 else "sm80"

    @property
    def sm90_or_later(self) -> bool:
        """True where the device runs Hopper's own kernels (``tensor_core_generation`` is
        ``"sm90"``: H100, H200, H800, B200)."""
        return self.tensor_core_generation == "sm90"

    @property
    def tcgen05(self) -> bool:
        """True on data-centre Blackwell (NVIDIA compute capability 10.x-11.x: B200, B300,
        GB200, GB300), whose fifth-generation tensor cores run ``tcgen05.mma`` (PTX ISA):
        one thread issues an MMA of 128 rows per SM (256 across an SM pair) accumulating in
        tensor memory, reading operands of either major order from shared memory, with block
        scale factors applied inside the MMA (``kind::mxf8f6f4``, ``kind::mxf4nvf4``). Where the
        time model's terms were stated for Hopper's warp-group MMAs (64 rows, fp8 B operand
        K-major only, scales applied on the CUDA cores) they read this flag:
        :func:`~mlacalc.timemodel.shared.mma_rows`, the fp8 prefill's V transpose, the
        block-scaled kernels' rescale (``promote_cycles``)."""
        cc = self.compute_capability
        return self.vendor.lower() in ("", "nvidia") and 10.0 <= cc < 12.0

    @property
    def kernel_generation(self) -> str:
        """The key of the engines' per-generation kernel tables (which kernel an engine runs on
        the device: ``moe_time.TRITON_DEFAULT_TILE``, ``mla_time.CONVERTING_KERNELS``,
        ``attention_time.PACKING_PREFILL``): ``"tcgen05"`` on data-centre Blackwell, whose
        engines run other kernels than on Hopper, else :attr:`tensor_core_generation`."""
        return "tcgen05" if self.tcgen05 else self.tensor_core_generation

    def peak(self, dtype: str) -> float:
        """Dense tensor rate for a kernel dtype (``fp8_block`` computes at the fp8 rate; a device
        without fp8 units runs fp8 at its bf16 rate)."""
        value = self._peaks_by_dtype.get(dtype)
        if value is None:
            value = self._peaks_by_dtype[dtype] = self._peak(dtype)
        return value

    def _peak(self, dtype: str) -> float:
        key = {
            "fp8_block": "fp8",
            "mxfp4": "fp4",
            "nvfp4": "fp4",
            "int8_wo": "bf16",
            "int4_wo": "bf16",
            "w4a16": "bf16",
            "w8a16": "bf16",
            "sq": "int8",
        }.get(dtype, dtype)
        try:
            value = lookup_peak(self.peaks, key)
        except MlacalcError:  # a dtype name mlacalc does not know: bf16 rate
            value = None
        if value is None and key in ("fp4", "int8", "int4"):
            value = lookup_peak(self.peaks, "fp8")
        if value is None:
            value = self.peaks.get("bf16") or self.peaks.get("fp16") or max(self.peaks.values())
        return float(value)


_CACHE: dict[int, tuple[HardwareSpec, DeviceFigures]] = {}


def device_figures(hw: HardwareSpec) -> DeviceFigures:
    """The figures of ``hw``: its catalogue fields, then :data:`ASSUMED`."""
    key = id(hw)
    cached = _CACHE.get(key)
    if cached is not None and cached[0] is hw:
        return cached[1]
    values: dict[str, float] = {}
    fallbacks: list[str] = []
    for figure, (attrs, scales) in _ATTRS.items():
        value = None
        for attr, scale in zip(attrs, scales):
            raw = getattr(hw, attr, None)
            if isinstance(raw, bool):  # a yes/no figure (scale_up_multicast): 1 or 0
                value = float(raw)
                break
            if raw:
                value = float(raw) * scale
                break
        if value is None and figure == "sm_count" and hw.kind == "cpu":
            value = 1.0  # a CPU: no SM tiling, one pool of cores
        if value is None:
            value, source = ASSUMED[figure]
            fallbacks.append(f"{figure} = {value:g} ({source})")
        values[figure] = value
    values["mesh_link_bytes_per_s"] = float(
        getattr(hw, "scale_up_mesh_link_bytes_per_s", None) or 0.0
    )
    for key in getattr(hw, "assumed", ()) or ():  # the file's own stated assumptions
        figure = ASSUMED_KEYS.get(key)
        if figure is not None:
            why = hw.field_sources.get(key, "stated as an assumption in the hardware file")
            fallbacks.append(f"{figure} = {values[figure]:g} (assumed: {why})")
    fig = DeviceFigures(
        name=hw.name,
        kind=hw.kind,
        peaks=dict(hw.peak_flops_per_s),
        hbm_bytes_per_s=float(hw.memory_bandwidth_bytes_per_s),
        sm_count=int(values["sm_count"]),
        l2_bytes=values["l2_bytes"],
        link_bytes_per_s=values["link_bytes_per_s"],
        link_latency_s=values["link_latency_s"],
        clock_hz=values["clock_hz"],
        link_multicast=values["link_multicast"],
        mesh_link_bytes_per_s=values["mesh_link_bytes_per_s"],
        fallbacks=tuple(fallbacks),
        architecture=getattr(hw, "architecture", "") or "",
        compute_capability=_capability(hw),
        vendor=str(getattr(hw, "vendor", "") or ""),
    )
    if len(_CACHE) > 64:
        _CACHE.clear()
    _CACHE[key] = (hw, fig)
    return fig


#: The compute capability of a device whose file names an NVIDIA architecture but gives no
#: capability: the data-centre part of each generation (CUDA C++ Programming Guide)
_ARCH_CAPABILITY = {
    "ampere": 8.0,
    "ada": 8.9,
    "ada lovelace": 8.9,
    "hopper": 9.0,
    "blackwell": 10.0,
}


def _capability(hw: HardwareSpec) -> float:
    cc = float(getattr(hw, "compute_capability", None) or 0.0)
    if cc > 0.0:
        return cc
    if str(getattr(hw, "vendor", "") or "").lower() not in ("", "nvidia"):
        return 0.0
    arch = str(getattr(hw, "architecture", "") or "").strip().lower()
    return _ARCH_CAPABILITY.get(arch, 0.0)


def mla_decode_kernel(
    device: DeviceFigures | HardwareSpec, *, non_splitting: bool = False
) -> dict[str, float]:
    """The MLA decode kernel a device runs, as the ``mla_decode`` shape columns that say so:
    the one rule the measured mapping (which kernel a measured row timed) and a model step
    (which kernel the device would run) share.

    - ``kv_split``: whether the kernel splits a sequence's keys over several SMs. The serving
      engines' MLA decode kernels do on every device (FlashMLA on Hopper, FlashInfer's and
      the Triton decode kernels elsewhere): 1 unless ``non_splitting`` says the row timed
      TensorRT-LLM 1.0's SM80 kernel (the measured A100 rows), which never splits (each unit
      walks its whole cache on one SM: 15.5 ms a layer at 131K keys and batch 1 on A100);
    - ``operand_reads``: how often a tile's MMAs read each cached row from shared memory, by
      :attr:`DeviceFigures.tensor_core_generation`: the ``mma.sync`` tiles of ``sm80`` once
      per 16-row warp, four warps to a 64-head tile (4); a warp-group MMA once (1).
    """
    if not isinstance(device, DeviceFigures):
        device = device_figures(device)
    reads = 4.0 if device.tensor_core_generation == "sm80" else 1.0
    return {"kv_split": 0.0 if non_splitting else 1.0, "operand_reads": reads}
