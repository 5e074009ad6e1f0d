"""The hardware catalogue: what a kernel model needs to know about a device.

One YAML file per device in ``mlacalc/data/hardware/``: dense tensor rates per dtype, HBM
bandwidth and capacity, SM count, L2 size, the clock of the quoted tensor peak, the
scale-up link (NVLink, Infinity Fabric or PCIe) and the scale-out network per GPU with
their latencies, and the GPUs per node. ``source`` cites the device's documents and
``field_sources`` names the source of every figure. Peaks are dense (no 2:4 sparsity)
tensor-core rates with FP32 accumulate unless a file says otherwise; units are in the
field names (decimal: 1 TFLOP/s = 1e12 FLOP/s, 1 GB = 1e9 B; ``l2_mib`` is 2^20 B); the
capacity is ``memory_bytes``, in bytes as the device reports it (an "80 GB" HBM part holds
80 GiB), and ``memory_gb`` is the datasheet's rounded label (read as 1e9 B only where a file
gives no ``memory_bytes``);
link bandwidths are per GPU in each direction; ``scale_up_multicast`` says whether the
scale-up switch reduces and multicasts in the fabric (NVLink SHARP), and
``scale_up_mesh_link_gb_per_s`` that the fabric is a full mesh of point-to-point links of that
rate each way (AMD's Infinity Fabric) rather than a switch: a group of g GPUs has g - 1 links a
GPU (:meth:`HardwareSpec.scale_up_bandwidth`). These files are the only
source of a device's figures: the time model (:mod:`mlacalc.timemodel.device`) and the
measured-set reader (:mod:`mlacalc.measured.tables`) read them through this module. A device
the microbenchmark measured loads from its sidecar with ``"measured:<set name>"`` (or the path
of the ``.json``): its peaks are the measured matmul and copy ceilings.

Names are case-insensitive. A family name that fits several entries (``"A100"``) is an
error listing them; a family name with one usual meaning (``"H100"``) resolves to it and
says so in the spec's ``alias_note``; the systems of aiconfigurator-layout measured sets
(``"h100_sxm"``, ``"a100_sxm"``: :data:`MEASURED_SYSTEMS`, the one system table) resolve to
their catalogue devices.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from difflib import get_close_matches
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from mlacalc.data import HARDWARE, MEASUREMENTS
from mlacalc.words.dtypes import canonical_dtype
from mlacalc.words.errors import (
    AmbiguousHardwareError,
    ConfigError,
    InvalidArgumentError,
    UnknownDtypeError,
    UnknownHardwareError,
)
from mlacalc.words.safeio import parse_json
from mlacalc.words.safeio import parse_yaml as parse_yaml_text
from mlacalc.words.safeio import read_text as _read_text

__all__ = [
    "AmbiguousHardwareError",
    "HardwareSpec",
    "UnknownHardwareError",
    "load_hardware",
    "measured_device_name",
    "measured_sets",
    "mesh_group_bandwidth",
    "shipped_hardware",
]

_NUMBER_FIELDS = (
    "memory_bandwidth_gb_per_s",
    "memory_gb",
    "memory_bytes",
    "sm_count",
    "l2_mib",
    "boost_clock_mhz",
    "scale_up_gb_per_s",
    "scale_up_mesh_link_gb_per_s",
    "scale_up_latency_us",
    "scale_out_gb_per_s",
    "scale_out_latency_us",
    "gpus_per_node",
    "scale_up_domain_gpus",
    "launch_latency_us",
    "compute_capability",
)
_FIELDS = {
    "name",
    "display_name",
    "vendor",
    "form_factor",
    "peak_tflops",
    "accumulate",
    "source",
    "notes",
    "kind",
    "scale_up_link",
    "scale_out_link",
    "field_sources",
    "architecture",
    "scale_up_multicast",
    "assumed",
    *_NUMBER_FIELDS,
}
_INTEGER_FIELDS = ("memory_bytes", "sm_count", "gpus_per_node", "scale_up_domain_gpus")
_REQUIRED = ("name", "peak_tflops", "memory_bandwidth_gb_per_s", "memory_gb", "source")

#: A family name with one usual meaning: the entry it resolves to.
ALIASES: dict[str, str] = {
    "h100": "H100-SXM",
    "h200-sxm": "H200",
    "h800-sxm": "H800",
    "b200-hgx": "B200",
    "rtx4090": "RTX-4090",
    "rtx4080": "RTX-4080",
    "4090": "RTX-4090",
    "4080": "RTX-4080",
    "b300-hgx": "B300",
    "gb200-nvl72": "GB200",
    "gb300-nvl72": "GB300",
    "rtx-pro-6000": "RTX-PRO-6000-Server",
    "rtx-pro-6000-blackwell": "RTX-PRO-6000-Server",
}
#: The systems of aiconfigurator-layout measured sets and the catalogue device each one is.
MEASURED_SYSTEMS: dict[str, str] = {
    "h100_sxm": "H100-SXM",
    "a100_sxm": "A100-SXM-80GB",
    "h200_sxm": "H200",
    "b200_sxm": "B200",
    "l40s": "L40S",
    # the other systems NVIDIA describes (aiconfigurator's systems/*.yaml) that have a catalogue
    # entry: a user's tables of them load against it (a100_pcie is the 80 GB card: none)
    "b300_sxm": "B300",
    "gb200": "GB200",
    "gb300": "GB300",
    "rtx_pro_6000_server": "RTX-PRO-6000-Server",
    "h100_pcie": "H100-PCIe",
    "a30": "A30",
    "l4": "L4",
}
#: A family name with several entries: it lists them instead of picking one.
FAMILIES: dict[str, tuple[str, ...]] = {"a100": ("A100-SXM-80GB", "A100-PCIe-40GB")}


def lookup_peak(peaks: dict[str, float], dtype: str) -> float | None:
    """The rate for ``dtype`` in a dtype -> FLOP/s table (fp8 variants share ``fp8``; a device
    without fp8 units runs fp8 weights upcast at its bf16 rate), or None."""
    key = canonical_dtype(dtype)
    key = {"fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}.get(key, key)
    if key in peaks:
        return peaks[key]
    if key == "fp8" and "bf16" in peaks:
        return peaks["bf16"]
    return None


@dataclass(frozen=True)
class HardwareSpec:
    """A device: dense peak FLOP/s per dtype, bandwidth, capacity.

    ``measured`` is true when the peaks are ceilings the microbenchmark measured;
    ``launch_latency_s`` is the measured per-op latency, or ``None`` for catalogue entries.
    """

    name: str
    display_name: str
    kind: str  # "gpu" or "cpu"
    peak_flops_per_s: dict[str, float]
    memory_bandwidth_bytes_per_s: float
    memory_bytes: int
    sm_count: int | None = None
    accumulate: str = "fp32"
    vendor: str = ""
    form_factor: str = ""
    source: tuple[str, ...] = ()
    notes: str = ""
    measured: bool = False
    launch_latency_s: float | None = None
    origin: str = field(default="", compare=False)
    l2_bytes: int | None = None
    boost_clock_hz: float | None = None
    scale_up_link: str = ""
    scale_up_bytes_per_s: float | None = None
    scale_up_latency_s: float | None = None
    scale_out_link: str = ""
    scale_out_bytes_per_s: float | None = None
    scale_out_latency_s: float | None = None
    gpus_per_node: int | None = None
    field_sources: dict[str, str] = field(default_factory=dict, compare=False)
    alias_note: str = field(default="", compare=False)
    #: the vendor's architecture name ("Hopper", "Ada Lovelace", "CDNA 3"), and for an NVIDIA
    #: GPU its CUDA compute capability (9.0 for Hopper): what decides which kernels a library
    #: builds for the device. None where the file does not say.
    architecture: str = ""
    compute_capability: float | None = None
    #: whether the scale-up switch reduces and multicasts in the fabric (NVLink SHARP, used by
    #: NCCL's NVLS all-reduce); None where the file does not say
    scale_up_multicast: bool | None = None
    #: GPUs on one scale-up fabric when it spans several nodes (an NVLink domain: 72 on a
    #: GB200/GB300 NVL72 rack of 4-GPU trays); None: the fabric is the node's
    scale_up_domain_gpus: int | None = None
    #: the rate of one point-to-point link each way where the scale-up fabric is a full mesh
    #: of such links (Infinity Fabric on an 8-GPU AMD platform) instead of a switch; None: a
    #: switch, where every group gets ``scale_up_bytes_per_s``
    scale_up_mesh_link_bytes_per_s: float | None = None
    #: the YAML keys whose figure is a stated assumption, not the device's own datasheet
    #: figure (another device's figure standing in): the time model lists them as assumed
    assumed: tuple[str, ...] = field(default=(), compare=False)

    @property
    def scale_up_gpus(self) -> int | None:
        """GPUs one scale-up fabric joins (the NVLink domain, else the node); None: no limit
        given. A group of at most this many GPUs talks over the scale-up link."""
        return self.scale_up_domain_gpus or self.gpus_per_node

    def scale_up_bandwidth(self, n_gpus: int) -> float | None:
        """Bandwidth (B/s per GPU each way) a group of ``n_gpus`` GPUs has on the scale-up
        fabric: the whole ``scale_up_bytes_per_s`` behind a switch; on a full mesh of
        point-to-point links, only the ``n_gpus - 1`` links to the group's other GPUs, capped
        by the aggregate (a pair has one link; all 8 GPUs of an AMD platform, all 7)."""
        bw, link = self.scale_up_bytes_per_s, self.scale_up_mesh_link_bytes_per_s
        if bw is None or not link:
            return bw
        return float(mesh_group_bandwidth(bw, link, n_gpus))

    def link(self, n_gpus: int) -> tuple[float, float]:
        """Bandwidth (B/s per GPU each way) and latency (s) of a group of ``n_gpus`` GPUs: the
        scale-up link within one scale-up fabric (a node, or an NVLink domain of several, as a
        GB200 NVL72 rack: :attr:`scale_up_gpus`), the scale-out network beyond it. A missing
        latency is 0 (the time model's fixed cost per call stands for it); a missing bandwidth
        is an error."""
        within = self.scale_up_gpus is None or n_gpus <= self.scale_up_gpus
        if within or n_gpus <= 1:
            bw, lat = self.scale_up_bandwidth(n_gpus), self.scale_up_latency_s
            what = "scale_up_gb_per_s"
        else:
            bw, lat, what = (
                self.scale_out_bytes_per_s,
                self.scale_out_latency_s,
                "scale_out_gb_per_s",
            )
        if bw is None:
            raise InvalidArgumentError(
                "hardware",
                f"{self.name} has no {what} for a group of {n_gpus} GPUs; "
                f"add it to a hardware file (see docs/hardware.md)",
            )
        return bw, lat or 0.0

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s for ``dtype`` (fp8 at the bf16 rate on a device without fp8)."""
        value = lookup_peak(self.peak_flops_per_s, dtype)
        if value is None:
            raise InvalidArgumentError(
                "dtype",
                f"{self.name} has no {canonical_dtype(dtype)} peak; known: "
                + ", ".join(self.peak_flops_per_s),
            )
        return value

    @property
    def ridge_point(self) -> float:
        """FLOPs per byte where bf16 (or the first listed dtype) turns compute-bound."""
        dtype = "bf16" if "bf16" in self.peak_flops_per_s else next(iter(self.peak_flops_per_s))
        return self.peak(dtype) / self.memory_bandwidth_bytes_per_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "display_name": self.display_name,
            "kind": self.kind,
            "peak_flops_per_s": dict(self.peak_flops_per_s),
            "memory_bandwidth_bytes_per_s": self.memory_bandwidth_bytes_per_s,
            "memory_bytes": self.memory_bytes,
            "sm_count": self.sm_count,
            "accumulate": self.accumulate,
            "measured": self.measured,
            "launch_latency_s": self.launch_latency_s,
            "source": list(self.source),
            "notes": self.notes,
            "l2_bytes": self.l2_bytes,
            "boost_clock_hz": self.boost_clock_hz,
            "scale_up_link": self.scale_up_link,
            "scale_up_bytes_per_s": self.scale_up_bytes_per_s,
            "scale_up_latency_s": self.scale_up_latency_s,
            "scale_out_link": self.scale_out_link,
            "scale_out_bytes_per_s": self.scale_out_bytes_per_s,
            "scale_out_latency_s": self.scale_out_latency_s,
            "gpus_per_node": self.gpus_per_node,
            "field_sources": dict(self.field_sources),
            "alias_note": self.alias_note,
            "architecture": self.architecture,
            "compute_capability": self.compute_capability,
            "scale_up_multicast": self.scale_up_multicast,
            "scale_up_domain_gpus": self.scale_up_domain_gpus,
            "scale_up_mesh_link_bytes_per_s": self.scale_up_mesh_link_bytes_per_s,
            "assumed": list(self.assumed),
        }


def _catalogue_dir() -> Path:
    return HARDWARE


def _measurements_dir() -> Path:
    return MEASUREMENTS


def shipped_hardware() -> list[str]:
    return sorted(p.stem for p in _catalogue_dir().glob("*.yaml"))


def measured_sets() -> list[str]:
    """Names of the committed measurement sets (``measured:<name>`` loads their device)."""
    return sorted(p.stem for p in _measurements_dir().glob("*.json"))


#: The measurement sets read by their path in this process (:func:`measured_device_name`):
#: ``measured:<stem>-<digest>`` -> the sidecar's path, which :func:`load_hardware` reads for
#: that name. A committed set is never held here (its name reads the committed file).
_NAMED_SETS: dict[str, Path] = {}


def measured_device_name(json_path: str | Path) -> str:
    """The device name of a microbenchmark set given by its path, a function of its files
    alone: a committed set, or a file of a committed set's name and the same sidecar and rows,
    is ``measured:<stem>``; any other set ``measured:<stem>-<the first 8 hex digits of the
    sha256 of its sidecar and rows file>`` (two runs saved under one name are two devices, in
    any order, in any process). :func:`load_hardware` reads that name in the process that read
    the path (a fitted profile's device and its notes name it so, not by the path as typed).

    >>> measured_device_name(_measurements_dir() / "cpu-2core-epyc-fp32.json")
    'measured:cpu-2core-epyc-fp32'
    """
    path = Path(json_path).expanduser().resolve()
    name = f"measured:{path.stem}"
    if not path.is_file():  # nothing to name it by: read as the path says (and refused there)
        return name
    committed = _measurements_dir() / f"{path.stem}.json"
    if committed.is_file() and committed.resolve() == path:
        return name
    digest = _set_digest(path)
    if committed.is_file() and _set_digest(committed) == digest:
        return name
    name = f"{name}-{digest[:8]}"
    _NAMED_SETS[name] = path  # the latest file of these contents (an earlier may be deleted)
    return name


def _set_digest(path: Path) -> str:
    """sha256 of a set's sidecar and its rows file (where the sidecar names one that lies
    beside it), hex."""
    h = hashlib.sha256(path.read_bytes())
    try:
        rows = json.loads(path.read_text(encoding="utf-8")).get("rows_file")
    except (ValueError, AttributeError, UnicodeDecodeError):
        rows = None
    if isinstance(rows, str) and (path.parent / rows).is_file():
        h.update(b"\0" + (path.parent / rows).read_bytes())
    return h.hexdigest()


def _number(origin: str, key: str, value: Any, *, integer: bool = False) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigError(
            f"must be a positive finite number, got {value!r}",
            source=origin,
            field=key,
            fix="give the datasheet figure in the unit the field name says",
        )
    if integer and not isinstance(value, int):
        raise ConfigError(f"must be a positive integer, got {value!r}", source=origin, field=key)
    return value


#: FLOPs per byte of memory traffic at which a device turns compute-bound (its ridge point,
#: per dtype): the catalogue's devices lie between 136 and 1,169, and a slow CUDA-core or CPU
#: rate can be near 1; a peak or a bandwidth typed in the wrong unit (PFLOP/s for TFLOP/s, TB/s
#: for GB/s) moves it a thousandfold, out of this range (an H200's bf16 peak typed in PFLOP/s:
#: 0.21 FLOP per byte)
RIDGE_RANGE = (0.5, 20_000.0)


def _capacity(origin: str, data: dict[str, Any]) -> int:
    """The device's memory in bytes: ``memory_bytes``, else the ``memory_gb`` label x 1e9.

    A ``memory_bytes`` more than 15% from the label is a unit slip (GB for bytes, MiB for GiB).
    """
    label = float(_number(origin, "memory_gb", data["memory_gb"])) * 1e9
    if data.get("memory_bytes") is None:
        return round(label)
    exact = int(_number(origin, "memory_bytes", data["memory_bytes"], integer=True))
    if not 0.85 <= exact / label <= 1.15:
        raise ConfigError(
            f"is {exact:,} B, {exact / label:.2f}x the memory_gb label ({label / 1e9:g} GB)",
            source=origin,
            field="memory_bytes",
            fix="give the capacity in bytes (80 GiB = 85899345920), or leave it out",
        )
    return exact


def _check_units(origin: str, flops: dict[str, float], bandwidth: float) -> None:
    """A clear error for a peak or bandwidth whose ridge point no real device has: a unit slip."""
    lo, hi = RIDGE_RANGE
    for dtype, peak in flops.items():
        ridge = peak / bandwidth
        if lo <= ridge <= hi:
            continue
        raise ConfigError(
            f"({peak / 1e12:,.4g} TFLOP/s) over memory_bandwidth_gb_per_s ({bandwidth / 1e9:,.4g} "
            f"GB/s) is {ridge:,.3g} FLOP per byte, where real devices lie between about {lo:g} "
            f"and {hi:,.0f}",
            source=origin,
            field=f"peak_tflops.{dtype}",
            fix="check the units: peak_tflops in dense TFLOP/s (989.5 for an H100's bf16, not "
            "0.99), memory_bandwidth_gb_per_s in GB/s (3350, not 3.35)",
        )


def hardware_from_dict(data: Any, origin: str = "<dict>") -> HardwareSpec:
    if not isinstance(data, dict):
        raise ConfigError("a hardware file must hold a mapping of fields", source=origin)
    unknown = [k for k in data if k not in _FIELDS]
    if unknown:
        close = get_close_matches(str(unknown[0]), list(_FIELDS), n=1)
        raise ConfigError(
            "is not a hardware field",
            source=origin,
            field=str(unknown[0]),
            fix=f"did you mean '{close[0]}'?" if close else "see docs/hardware.md",
        )
    for key in _REQUIRED:
        if key not in data:
            raise ConfigError("is missing", source=origin, field=key)
    peaks = data["peak_tflops"]
    if not isinstance(peaks, dict) or not peaks:
        raise ConfigError(
            "must map dtypes to dense TFLOP/s, e.g. {bf16: 989.5}",
            source=origin,
            field="peak_tflops",
        )
    flops = {}
    for dtype, value in peaks.items():
        try:
            key = canonical_dtype(str(dtype))
        except UnknownDtypeError as exc:
            raise ConfigError(str(exc), source=origin, field="peak_tflops") from None
        flops[key] = float(_number(origin, f"peak_tflops.{dtype}", value)) * 1e12
    source = data["source"]
    source = (source,) if isinstance(source, str) else tuple(source)
    sm = data.get("sm_count")
    if sm is not None:
        _number(origin, "sm_count", sm, integer=True)
    latency = data.get("launch_latency_us")
    if latency is not None:
        latency = _number(origin, "launch_latency_us", latency) * 1e-6
    kind = data.get("kind", "gpu")
    if kind not in ("gpu", "cpu"):
        raise ConfigError(f"must be gpu or cpu, got {kind!r}", source=origin, field="kind")
    opt = {
        k: (
            _number(origin, k, data[k], integer=k in _INTEGER_FIELDS)
            if data.get(k) is not None
            else None
        )
        for k in (
            "l2_mib",
            "boost_clock_mhz",
            "scale_up_gb_per_s",
            "scale_up_mesh_link_gb_per_s",
            "scale_up_latency_us",
            "scale_out_gb_per_s",
            "scale_out_latency_us",
            "gpus_per_node",
            "scale_up_domain_gpus",
            "compute_capability",
        )
    }
    _check_mesh(origin, opt["scale_up_mesh_link_gb_per_s"], opt["scale_up_gb_per_s"])
    _check_mesh_reach(origin, opt)
    domain, node = opt["scale_up_domain_gpus"], opt["gpus_per_node"]
    if domain is not None and node is not None and domain < node:
        raise ConfigError(
            f"must be at least gpus_per_node ({node:g}), got {domain:g}",
            source=origin,
            field="scale_up_domain_gpus",
            fix="give the GPUs one NVLink domain joins (72 for an NVL72 rack), or leave it out",
        )
    assumed = _assumed(data.get("assumed"), data, origin)
    sources = data.get("field_sources", {}) or {}
    if not isinstance(sources, dict) or not all(isinstance(v, str) for v in sources.values()):
        raise ConfigError(
            "must map field names to the source of each figure",
            source=origin,
            field="field_sources",
        )
    stray = [k for k in sources if k not in _FIELDS]
    if stray:
        raise ConfigError(
            "names a field the file does not have", source=origin, field=f"field_sources.{stray[0]}"
        )

    def scaled(key: str, factor: float) -> float | None:
        return None if opt[key] is None else float(opt[key]) * factor

    multicast = data.get("scale_up_multicast")
    if multicast is not None and not isinstance(multicast, bool):
        raise ConfigError(
            f"must be true or false, got {multicast!r}", source=origin, field="scale_up_multicast"
        )
    bandwidth = float(
        _number(origin, "memory_bandwidth_gb_per_s", data["memory_bandwidth_gb_per_s"])
    )
    _check_units(origin, flops, bandwidth * 1e9)

    return HardwareSpec(
        name=str(data["name"]),
        display_name=str(data.get("display_name", data["name"])),
        kind=kind,
        peak_flops_per_s=flops,
        memory_bandwidth_bytes_per_s=bandwidth * 1e9,
        memory_bytes=_capacity(origin, data),
        sm_count=sm,
        accumulate=str(data.get("accumulate", "fp32")),
        vendor=str(data.get("vendor", "")).strip().lower(),
        form_factor=str(data.get("form_factor", "")),
        source=source,
        notes=str(data.get("notes", "")),
        launch_latency_s=latency,
        origin=origin,
        l2_bytes=None if opt["l2_mib"] is None else round(opt["l2_mib"] * 2**20),
        boost_clock_hz=scaled("boost_clock_mhz", 1e6),
        scale_up_link=str(data.get("scale_up_link", "")),
        scale_up_bytes_per_s=scaled("scale_up_gb_per_s", 1e9),
        scale_up_latency_s=scaled("scale_up_latency_us", 1e-6),
        scale_out_link=str(data.get("scale_out_link", "")),
        scale_out_bytes_per_s=scaled("scale_out_gb_per_s", 1e9),
        scale_out_latency_s=scaled("scale_out_latency_us", 1e-6),
        gpus_per_node=None if opt["gpus_per_node"] is None else int(opt["gpus_per_node"]),
        field_sources={str(k): v for k, v in sources.items()},
        architecture=str(data.get("architecture", "")),
        compute_capability=scaled("compute_capability", 1.0),
        scale_up_multicast=multicast,
        scale_up_domain_gpus=None if domain is None else int(domain),
        scale_up_mesh_link_bytes_per_s=scaled("scale_up_mesh_link_gb_per_s", 1e9),
        assumed=assumed,
    )


def mesh_group_bandwidth(aggregate: Any, link: Any, n_gpus: Any) -> Any:
    """Bandwidth a GPU of a group of ``n_gpus`` has on a full mesh of point-to-point links of
    rate ``link``: its ``n_gpus - 1`` links to the others, at most the ``aggregate`` (scalars
    or numpy arrays: the link model's groups and the kernel model's batches share it)."""
    return np.minimum(aggregate, np.maximum(np.asarray(n_gpus) - 1, 1) * link)


def _check_mesh(origin: str, link: float | None, total: float | None) -> None:
    """A mesh link's rate needs the aggregate it is a share of, and cannot exceed it."""
    if link is None:
        return
    if total is None:
        raise ConfigError(
            "needs scale_up_gb_per_s (the aggregate a GPU's links add up to)",
            source=origin,
            field="scale_up_mesh_link_gb_per_s",
        )
    if link <= 0 or link > total:
        raise ConfigError(
            f"must be above 0 and at most scale_up_gb_per_s ({total:g}), got {link:g}",
            source=origin,
            field="scale_up_mesh_link_gb_per_s",
            fix="give one point-to-point link's rate each way (64 for an MI300X link)",
        )


def _check_mesh_reach(origin: str, opt: dict) -> None:
    """A full mesh's links to the node's other GPUs, link x (gpus_per_node - 1), must add up
    to at least the aggregate: below it the whole node would never reach the rate the file
    gives (32 GB/s links with 448 GB/s over 8 GPUs: 224 for all 8, where the aggregate says
    448). Unchecked without gpus_per_node (the mesh's size unknown)."""
    link, total, node = (
        opt["scale_up_mesh_link_gb_per_s"],
        opt["scale_up_gb_per_s"],
        opt["gpus_per_node"],
    )
    if link is None or total is None or node is None or node < 2:
        return
    reach = link * (node - 1)
    if reach < total * (1 - 1e-9):
        raise ConfigError(
            f"{link:g} x {node - 1:g} links (gpus_per_node - 1) = {reach:g} GB/s is below "
            f"scale_up_gb_per_s ({total:g}): the node's {node:g} GPUs would never reach the "
            "aggregate",
            source=origin,
            field="scale_up_mesh_link_gb_per_s",
            fix=f"give one link's rate, scale_up_gb_per_s / (gpus_per_node - 1) = "
            f"{total / (node - 1):g} for an aggregate over a full mesh, or lower "
            "scale_up_gb_per_s to what the links add up to",
        )


def _assumed(raw: Any, data: dict, origin: str) -> tuple[str, ...]:
    """The ``assumed`` list: figures of the file that are assumptions, each a number field the
    file gives."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(k, str) for k in raw):
        raise ConfigError(
            "must list the field names whose figure is an assumption",
            source=origin,
            field="assumed",
            fix="e.g. assumed: [scale_up_latency_us]",
        )
    for key in raw:
        if key not in _NUMBER_FIELDS or key not in data:
            raise ConfigError(
                "names a figure the file does not give", source=origin, field=f"assumed.{key}"
            )
    return tuple(raw)


def read_sidecar(path: Path) -> dict:
    """The JSON sidecar of a measurement set, checked to be an ``mlacalc.bench/1`` file whose
    fields every reader uses have their types and physical bounds (:func:`check_sidecar`)."""
    meta = parse_json(_read_text(Path(path), what="measurement sidecars"), str(path))
    if not isinstance(meta, dict) or meta.get("schema") != "mlacalc.bench/1":
        raise ConfigError(
            "is not an mlacalc.bench/1 measurement sidecar",
            source=str(path),
            field="schema",
            fix="pass the .json that mlacalc bench wrote",
        )
    for key in ("ceilings", "device", "rows_file"):
        if key not in meta:
            raise ConfigError("is missing", source=str(path), field=key)
    check_sidecar(meta, str(path))
    return meta


def _sidecar_error(origin: str, field: str, what: str) -> ConfigError:
    return ConfigError(
        f"must be {what}", source=origin, field=field, fix="pass the .json that mlacalc bench wrote"
    )


def _rate(meta: dict, origin: str, field: str, *, zero: bool = False) -> None:
    """A positive finite number (``zero``: or 0) at ``field`` (dotted) of ``meta``."""
    value: Any = meta
    for part in field.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
        or (value == 0 and not zero)
    ):
        raise _sidecar_error(origin, field, f"a {'non-negative' if zero else 'positive'} number")


def _rates_by_dtype(ceilings: dict, origin: str, name: str, *, required: bool) -> None:
    table = ceilings.get(name)
    if table is None and not required:
        return
    if not isinstance(table, dict) or (required and not table):
        raise _sidecar_error(origin, f"ceilings.{name}", "a mapping of dtypes to rates")
    for dtype in table:
        try:
            canonical_dtype(dtype)
        except UnknownDtypeError:
            raise _sidecar_error(
                origin, f"ceilings.{name}.{str(dtype)[:20]}", "keyed by a known dtype"
            ) from None
        _rate(ceilings, origin, f"{name}.{dtype}")


def check_sidecar(meta: dict, origin: str) -> None:
    """The fields of a measurement sidecar the readers use: ``rows_file`` a file name beside
    it, ``device`` a mapping whose ``kind`` is cuda or cpu, the ceilings positive finite rates
    by known dtype, the GEMM sweep increasing sizes with positive times; every error one line
    naming the file and field (a malformed sidecar was an AttributeError, KeyError or
    IndexError in the API, the CLI and the app)."""
    rows = meta["rows_file"]
    if not isinstance(rows, str) or not rows or Path(rows).name != rows or rows in (".", ".."):
        raise _sidecar_error(origin, "rows_file", "the name of the rows file beside it")
    device = meta["device"]
    if not isinstance(device, dict) or device.get("kind") not in ("cuda", "cpu"):
        raise _sidecar_error(origin, "device.kind", "cuda or cpu, in a mapping 'device'")
    for key in ("memory_bytes", "sm_count"):
        value = device.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise _sidecar_error(origin, f"device.{key}", "a whole number")
        if value is not None and value <= 0:
            raise _sidecar_error(origin, f"device.{key}", "positive")
    ceilings = meta["ceilings"]
    if not isinstance(ceilings, dict):
        raise _sidecar_error(origin, "ceilings", "a mapping of measured ceilings")
    _rates_by_dtype(ceilings, origin, "matmul_flops_per_s", required=True)
    _rates_by_dtype(ceilings, origin, "gemv_bytes_per_s", required=False)
    _rate(ceilings, origin, "copy_bytes_per_s")
    _rate(ceilings, origin, "launch_latency_s", zero=True)
    if "first_touch_bytes_per_s" in ceilings:  # measured by CPU runs since the eager model
        _rate(ceilings, origin, "first_touch_bytes_per_s")
    sweeps = ceilings.get("gemm_m_sweep", {})
    if not isinstance(sweeps, dict):
        raise _sidecar_error(origin, "ceilings.gemm_m_sweep", "a mapping of dtypes to sweeps")
    for dtype, sweep in sweeps.items():
        where = f"ceilings.gemm_m_sweep.{str(dtype)[:20]}"
        _check_sweep(sweep, origin, where)
        try:
            canonical_dtype(dtype)
        except UnknownDtypeError:
            raise _sidecar_error(origin, where, "keyed by a known dtype") from None


def _check_sweep(sweep: Any, origin: str, where: str) -> None:
    """One dtype's GEMM sweep: ``n`` and increasing sizes ``m``, a positive time for each."""
    if not isinstance(sweep, dict):
        raise _sidecar_error(origin, where, "a mapping with n, m and seconds")
    n, ms, secs = sweep.get("n"), sweep.get("m"), sweep.get("seconds")
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise _sidecar_error(origin, f"{where}.n", "a positive whole number")
    if (
        not isinstance(ms, list)
        or not ms
        or not all(isinstance(m, int) and not isinstance(m, bool) and m > 0 for m in ms)
        or any(b <= a for a, b in pairwise(ms))
    ):
        raise _sidecar_error(origin, f"{where}.m", "increasing positive whole numbers")
    if (
        not isinstance(secs, list)
        or len(secs) != len(ms)
        or not all(
            isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s) and s > 0
            for s in secs
        )
    ):
        raise _sidecar_error(origin, f"{where}.seconds", "a positive time for each m")


def hardware_from_measurements(json_path: str | Path, name: str | None = None) -> HardwareSpec:
    """The device of a measurement set, with its measured ceilings as peaks; ``name`` where the
    caller knows it (a committed set's, one read by its path before), else
    :func:`measured_device_name`'s (which hashes its files)."""
    path = Path(json_path)
    meta = read_sidecar(path)
    device, ceilings = meta["device"], meta["ceilings"]
    memory = device.get("memory_bytes")
    if memory is None and device["kind"] == "cpu":
        memory = _host_memory()
    return HardwareSpec(
        name=name or measured_device_name(path),
        display_name=f"{device['name']} (measured)",
        kind="gpu" if device["kind"] == "cuda" else "cpu",
        peak_flops_per_s={
            canonical_dtype(k): float(v) for k, v in ceilings["matmul_flops_per_s"].items()
        },
        memory_bandwidth_bytes_per_s=float(ceilings["copy_bytes_per_s"]),
        memory_bytes=int(memory or 0),
        sm_count=device.get("sm_count"),
        source=(f"measured by mlacalc bench: {path.name}",),
        notes=f"{device.get('threads', '?')} threads, torch {device.get('torch_version', '?')}",
        measured=True,
        launch_latency_s=float(ceilings["launch_latency_s"]),
        origin=str(path),
    )


def _host_memory() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def load_hardware(name_or_path: str | os.PathLike | HardwareSpec) -> HardwareSpec:
    """A device spec: a shipped name (``"H100-SXM"``, ``"h200"``), a YAML path,
    ``"measured:<set>"`` for a committed measurement set, or a measurement ``.json``."""
    if isinstance(name_or_path, HardwareSpec):
        return name_or_path
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise InvalidArgumentError(
            "hardware", f"must be a hardware name or a file path, got {name_or_path!r}"
        )
    text = os.fspath(name_or_path).strip()
    known = {n.lower(): n for n in shipped_hardware()}
    key = text.lower()
    if key not in known and not key.startswith("measured:") and not Path(text).suffix:
        # "GB200 NVL72", "h100_sxm" and "rtx pro 6000" name entries spelt with hyphens
        spelt = re.sub(r"[\s_]+", "-", key)
        if spelt in known or spelt in ALIASES:
            key = spelt
    if key in known:
        spec = _load_yaml(_catalogue_dir() / f"{known[key]}.yaml")
        if key != text.lower():  # respelt ("h100 sxm"): said as an alias is
            return dataclasses.replace(spec, alias_note=f"'{text}' means {known[key]}")
        return spec
    if key in FAMILIES:
        raise AmbiguousHardwareError(text, FAMILIES[key])
    target = ALIASES.get(key) or MEASURED_SYSTEMS.get(key)
    if target is not None and target.lower() in known:
        spec = _load_yaml(_catalogue_dir() / f"{target}.yaml")
        return dataclasses.replace(spec, alias_note=f"'{text}' means {target}")
    if text.lower().startswith("measured:"):
        set_name = text.split(":", 1)[1]
        named = _NAMED_SETS.get(f"measured:{set_name}")
        if named is not None:  # a set given by its path in this process
            return hardware_from_measurements(named, f"measured:{set_name}")
        path = _measurements_dir() / f"{set_name}.json"
        if not path.is_file() and re.search(r"-[0-9a-f]{8}$", set_name):
            raise InvalidArgumentError(
                "hardware",
                f"'{text}' names a microbenchmark set by its path's stem and digest, read in "
                "another run: give the set by its path (-H PATH/TO/SET.json; a profile's "
                "fitted_on sources name it)",
            )
        if not path.is_file() and (os.sep in set_name or set_name.endswith(".json")):
            raise InvalidArgumentError(
                "hardware",
                f"'{text}': measured: takes a committed set's name "
                f"({', '.join(measured_sets()) or 'none committed'}); give a microbenchmark "
                f".json by its path alone: -H {set_name}",
            )
        if not path.is_file():
            raise UnknownHardwareError(
                text, [f"measured:{s}" for s in measured_sets()] + shipped_hardware()
            )
        return hardware_from_measurements(path, f"measured:{set_name}")
    path = Path(text).expanduser()
    if path.is_file() and path.suffix == ".json":
        try:
            return hardware_from_measurements(path)
        except ConfigError as exc:
            if exc.field != "schema":
                raise
            raise ConfigError(
                exc.message,
                source=exc.source,
                field=exc.field,
                fix="for a device's datasheet figures pass a hardware .yaml, like "
                "mlacalc/data/hardware/H100-SXM.yaml; or the .json that mlacalc bench wrote",
            ) from None
    if path.is_file():
        return _load_yaml(path)
    if os.sep in text or text.endswith((".yaml", ".yml", ".json")):
        raise InvalidArgumentError(
            "hardware",
            f"'{text}': no such file (check the path, or give a shipped hardware name)",
        )
    raise UnknownHardwareError(
        text, shipped_hardware() + [f"measured:{s}" for s in measured_sets()]
    )


_CACHE: dict[tuple[str, str], HardwareSpec] = {}


def _load_yaml(path: Path) -> HardwareSpec:

    text = _read_text(path)
    key = (str(path), text)  # a file edited in place is read again
    if key not in _CACHE:
        data = parse_yaml_text(text, key[0])
        if data is None:
            raise ConfigError("is empty", source=key[0])
        _CACHE[key] = hardware_from_dict(data, key[0])
    return _CACHE[key]
