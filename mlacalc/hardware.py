"""The hardware catalogue: peak FLOP/s per dtype, memory bandwidth and capacity.

One YAML file per device in ``hardware_configs/`` with its ``source``. Peaks are dense
(no 2:4 sparsity) tensor-core rates with FP32 accumulate unless a file says otherwise;
units are in the field names (``peak_tflops``, ``memory_bandwidth_gb_per_s``,
``memory_gb``, decimal: 1 TFLOP/s = 1e12 FLOP/s, 1 GB = 1e9 B). A device the
microbenchmark measured loads from its sidecar with ``"measured:<set name>"`` (or the
path of the ``.json``): its peaks are the measured matmul and copy ceilings.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from difflib import get_close_matches
from pathlib import Path
from typing import Any

from .dtypes import canonical_dtype
from .errors import ConfigError, InvalidArgumentError, MlacalcError, UnknownDtypeError

__all__ = ["HardwareSpec", "load_hardware", "shipped_hardware", "measured_sets", "UnknownHardwareError"]

_FIELDS = {"name", "display_name", "vendor", "form_factor", "peak_tflops", "accumulate",
           "memory_bandwidth_gb_per_s", "memory_gb", "sm_count", "source", "notes", "kind", "launch_latency_us"}
_REQUIRED = ("name", "peak_tflops", "memory_bandwidth_gb_per_s", "memory_gb", "source")


class UnknownHardwareError(KeyError, MlacalcError):
    def __init__(self, name: str, known: list[str]):
        self.name, self.known = name, sorted(known)
        super().__init__(name)

    def __str__(self) -> str:
        close = get_close_matches(self.name.upper(), [k.upper() for k in self.known], n=3, cutoff=0.4)
        close = [k for k in self.known if k.upper() in close]
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        return (f"unknown hardware '{self.name}'.{hint} Known: {', '.join(self.known)}; "
                "or a YAML file, or measured:<set> for a measured device.")


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
    kind: str                                   # "gpu" or "cpu"
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

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s for ``dtype``; fp8 falls back to the bf16 rate where a device has no fp8."""
        value = lookup_peak(self.peak_flops_per_s, dtype)
        if value is None:
            raise InvalidArgumentError("dtype", f"{self.name} has no {canonical_dtype(dtype)} peak; known: "
                                       + ", ".join(self.peak_flops_per_s))
        return value

    @property
    def ridge_point(self) -> float:
        """FLOPs per byte where bf16 (or the first listed dtype) turns compute-bound."""
        dtype = "bf16" if "bf16" in self.peak_flops_per_s else next(iter(self.peak_flops_per_s))
        return self.peak(dtype) / self.memory_bandwidth_bytes_per_s

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "display_name": self.display_name, "kind": self.kind,
                "peak_flops_per_s": dict(self.peak_flops_per_s),
                "memory_bandwidth_bytes_per_s": self.memory_bandwidth_bytes_per_s,
                "memory_bytes": self.memory_bytes, "sm_count": self.sm_count, "accumulate": self.accumulate,
                "measured": self.measured, "launch_latency_s": self.launch_latency_s, "source": list(self.source),
                "notes": self.notes}


def _catalogue_dir() -> Path:
    here = Path(__file__).resolve().parent / "hardware_configs"
    return here if here.is_dir() else Path(__file__).resolve().parent.parent / "hardware_configs"


def _measurements_dir() -> Path:
    return Path(__file__).resolve().parent / "measurements"


def shipped_hardware() -> list[str]:
    return sorted(p.stem for p in _catalogue_dir().glob("*.yaml"))


def measured_sets() -> list[str]:
    """Names of the committed measurement sets (``measured:<name>`` loads their device)."""
    return sorted(p.stem for p in _measurements_dir().glob("*.json"))


def _number(origin: str, key: str, value: Any, *, integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConfigError(f"must be a positive number, got {value!r}", source=origin, field=key)
    if integer and not isinstance(value, int):
        raise ConfigError(f"must be a positive integer, got {value!r}", source=origin, field=key)
    return value


def hardware_from_dict(data: Any, origin: str = "<dict>") -> HardwareSpec:
    if not isinstance(data, dict):
        raise ConfigError("a hardware file must hold a mapping of fields", source=origin)
    unknown = [k for k in data if k not in _FIELDS]
    if unknown:
        close = get_close_matches(str(unknown[0]), list(_FIELDS), n=1)
        raise ConfigError("is not a hardware field", source=origin, field=str(unknown[0]),
                          fix=f"did you mean '{close[0]}'?" if close else "see docs/hardware.md")
    for key in _REQUIRED:
        if key not in data:
            raise ConfigError("is missing", source=origin, field=key)
    peaks = data["peak_tflops"]
    if not isinstance(peaks, dict) or not peaks:
        raise ConfigError("must map dtypes to dense TFLOP/s, e.g. {bf16: 989.5}", source=origin,
                          field="peak_tflops")
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
    return HardwareSpec(
        name=str(data["name"]), display_name=str(data.get("display_name", data["name"])), kind=kind,
        peak_flops_per_s=flops,
        memory_bandwidth_bytes_per_s=float(_number(origin, "memory_bandwidth_gb_per_s",
                                                   data["memory_bandwidth_gb_per_s"])) * 1e9,
        memory_bytes=int(round(float(_number(origin, "memory_gb", data["memory_gb"])) * 1e9)),
        sm_count=sm, accumulate=str(data.get("accumulate", "fp32")), vendor=str(data.get("vendor", "")),
        form_factor=str(data.get("form_factor", "")), source=source, notes=str(data.get("notes", "")),
        launch_latency_s=latency, origin=origin)


def read_sidecar(path: Path) -> dict:
    """The JSON sidecar of a measurement set, checked to be an ``mlacalc.bench/1`` file."""
    try:
        meta = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot be read ({exc.strerror or exc})", source=str(path)) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"is not valid JSON ({exc.msg} at line {exc.lineno})", source=str(path)) from None
    if not isinstance(meta, dict) or meta.get("schema") != "mlacalc.bench/1":
        raise ConfigError("is not an mlacalc.bench/1 measurement sidecar", source=str(path), field="schema",
                          fix="pass the .json that mlacalc bench wrote")
    for key in ("ceilings", "device", "rows_file"):
        if key not in meta:
            raise ConfigError("is missing", source=str(path), field=key)
    return meta


def hardware_from_measurements(json_path: str | Path) -> HardwareSpec:
    """The device of a measurement set, with its measured ceilings as peaks."""
    path = Path(json_path)
    meta = read_sidecar(path)
    device, ceilings = meta["device"], meta["ceilings"]
    memory = device.get("memory_bytes")
    if memory is None and device["kind"] == "cpu":
        memory = _host_memory()
    return HardwareSpec(
        name=f"measured:{path.stem}", display_name=f"{device['name']} (measured)",
        kind="gpu" if device["kind"] == "cuda" else "cpu",
        peak_flops_per_s={canonical_dtype(k): float(v) for k, v in ceilings["matmul_flops_per_s"].items()},
        memory_bandwidth_bytes_per_s=float(ceilings["copy_bytes_per_s"]), memory_bytes=int(memory or 0),
        sm_count=device.get("sm_count"), source=(f"measured by mlacalc bench: {path.name}",),
        notes=f"{device['threads']} threads, torch {device['torch_version']}", measured=True,
        launch_latency_s=float(ceilings["launch_latency_s"]), origin=str(path))


def _host_memory() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def load_hardware(name_or_path: "str | os.PathLike | HardwareSpec") -> HardwareSpec:
    """A device spec: a shipped name (``"H100-SXM"``, ``"h200"``), a YAML path,
    ``"measured:<set>"`` for a committed measurement set, or a measurement ``.json``."""
    if isinstance(name_or_path, HardwareSpec):
        return name_or_path
    text = os.fspath(name_or_path).strip()
    known = {n.lower(): n for n in shipped_hardware()}
    if text.lower() in known:
        path = _catalogue_dir() / f"{known[text.lower()]}.yaml"
        return _load_yaml(path)
    if text.lower().startswith("measured:"):
        set_name = text.split(":", 1)[1]
        path = _measurements_dir() / f"{set_name}.json"
        if not path.is_file():
            raise UnknownHardwareError(text, [f"measured:{s}" for s in measured_sets()] + shipped_hardware())
        return hardware_from_measurements(path)
    path = Path(text).expanduser()
    if path.is_file():
        return hardware_from_measurements(path) if path.suffix == ".json" else _load_yaml(path)
    if os.sep in text or text.endswith((".yaml", ".yml", ".json")):
        raise ConfigError("no such file", source=text, fix="check the path, or give a shipped hardware name")
    raise UnknownHardwareError(text, shipped_hardware() + [f"measured:{s}" for s in measured_sets()])


_CACHE: dict[tuple[str, str], HardwareSpec] = {}


def _load_yaml(path: Path) -> HardwareSpec:
    from .config import _read_text, parse_yaml_text

    text = _read_text(path)
    key = (str(path), text)                  # a file edited in place is read again
    if key not in _CACHE:
        data = parse_yaml_text(text, key[0])
        if data is None:
            raise ConfigError("is empty", source=key[0])
        _CACHE[key] = hardware_from_dict(data, key[0])
    return _CACHE[key]
