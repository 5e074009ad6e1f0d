"""Measured sets: kernel timings with the shapes that produced them, read into one type.

Two sources are read:

* tables in aiconfigurator's native layout: ``<system>/<family>/<framework>/<version>/``
  folders, each with a ``collection_meta.yaml`` and one or more ``*_perf.parquet`` tables.
  A path may be the ``<system>`` folder, any folder below it, or one parquet file. Reading
  parquet needs the optional ``measured`` extra (pyarrow);
* the companion microbenchmark's own files (``mlacalc bench``: a ``.json`` sidecar and its
  ``.csv`` rows), which need nothing beyond the standard library.

Every table becomes a :class:`MeasuredTable`: its columns as numpy arrays (numbers as int64 or
float64, text as numpy unicode arrays), the measured seconds per row, and where it came from.
The system folder names the device, mapped onto the hardware catalogue by
:func:`system_device` (aiconfigurator's system names, :data:`SYSTEM_DEVICES`, or any name
``-H`` accepts: ``H20/``, ``mi300x/``); a folder that names no catalogue device is an error
that names it and lists the catalogue.
"""

from __future__ import annotations

import csv
import hashlib
import math
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mlacalc.hardware.catalogue import (
    MEASURED_SYSTEMS,
    load_hardware,
    read_sidecar,
    shipped_hardware,
)
from mlacalc.words.engines import ALL_ENGINES, SHARED, check_engine, engine_of_framework
from mlacalc.words.errors import ConfigError, InvalidArgumentError, MlacalcError
from mlacalc.words.safeio import parse_data, read_text

__all__ = [
    "MEASURED_INPUTS",
    "SYSTEM_DEVICES",
    "SYSTEM_L2_BYTES",
    "MeasuredSet",
    "MeasuredTable",
    "UnknownSystemError",
    "bench_sidecar",
    "gpu_device",
    "load_measured",
    "measured_fingerprint",
    "observations_digest",
    "read_bench_set",
    "system_device",
    "table_digest",
]

#: aiconfigurator system folder -> hardware catalogue name: the catalogue's own table.
SYSTEM_DEVICES: Mapping[str, str] = MEASURED_SYSTEMS


class _SystemL2(Mapping[str, int]):
    """System folder -> the L2 bytes of its device, as the catalogue gives them (the figure the
    collectors read with ``torch.cuda.get_device_properties``), for the systems whose device
    has one; read from the catalogue on first use."""

    def __init__(self) -> None:
        self._table: dict[str, int] | None = None

    def _read(self) -> dict[str, int]:
        if self._table is None:
            l2 = {s: load_hardware(d).l2_bytes for s, d in SYSTEM_DEVICES.items()}
            self._table = {s: int(b) for s, b in l2.items() if b}
        return self._table

    def __getitem__(self, system: str) -> int:
        table = self._read()
        if system in table:
            return table[system]
        device = system_device(system)  # a folder named after a catalogue device (H20/)
        l2 = load_hardware(device).l2_bytes if device is not None else None
        if not l2:
            raise KeyError(system)
        return int(l2)

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())


#: L2 size of each system's device (the GEMM table's weight-copy rule reads it).
SYSTEM_L2_BYTES: Mapping[str, int] = _SystemL2()

#: Columns that hold numbers in aiconfigurator's tables (sizes, counts, times) and columns that
#: hold text (dtypes, names, modes): a table that gives one of them in the other type is
#: refused, naming the column. Columns named in neither are read as they come.
NUMBER_COLUMNS = frozenset(
    [
        "batch_size",
        "beam_width",
        "chunk_size",
        "combine_avg_t_us",
        "combine_bandwidth_gbps",
        "combine_notify_us",
        "combine_sms",
        "combine_transmit_us",
        "compress_ratio",
        "d_conv",
        "d_model",
        "d_state",
        "dispatch_avg_t_us",
        "dispatch_bandwidth_gbps",
        "dispatch_notify_us",
        "dispatch_sms",
        "dispatch_transmit_us",
        "hc_mult",
        "head_dim",
        "head_k_dim",
        "head_v_dim",
        "hidden_size",
        "inter_size",
        "isl",
        "k",
        "latency",
        "local_num_heads",
        "m",
        "message_size",
        "moe_ep_size",
        "moe_tp_size",
        "n",
        "n_groups",
        "nheads",
        "node_num",
        "num_experts",
        "num_gpus",
        "num_heads",
        "num_k_heads",
        "num_key_value_heads",
        "num_sites",
        "num_token",
        "num_tokens",
        "num_topk",
        "num_v_heads",
        "seq_len",
        "sinkhorn_iters",
        "step",
        "topk",
        "tp_size",
        "window_size",
    ]
)
TEXT_COLUMNS = frozenset(
    [
        "allreduce_dtype",
        "architecture",
        "attn_dtype",
        "backend",
        "bmm_dtype",
        "device",
        "distribution",
        "framework",
        "gemm_dtype",
        "gemm_type",
        "implementation",
        "kernel_source",
        "kv_cache_dtype",
        "mla_dtype",
        "model",
        "model_name",
        "moe_dtype",
        "nccl_dtype",
        "op_name",
        "phase",
        "quant_dtype",
        "score_mode",
        "version",
    ]
)

#: Largest ``collection_meta.yaml`` read (these files are a few hundred bytes).
_META_LIMIT = 64 * 1024

#: Columns that hold a time, and the factor that turns them into seconds. A table with several
#: time columns becomes one row per (row, time column), with the column name in ``measure``.
_TIME_COLUMNS: dict[str, tuple[tuple[str, str, float], ...]] = {
    "wideep_deepep_ll_perf": (
        ("dispatch", "dispatch_avg_t_us", 1e-6),
        ("combine", "combine_avg_t_us", 1e-6),
    ),
    "wideep_deepep_normal_perf": (
        ("dispatch", "dispatch_transmit_us", 1e-6),
        ("combine", "combine_transmit_us", 1e-6),
    ),
}


def system_device(system: str) -> str | None:
    """The catalogue device a system folder names, else None: aiconfigurator's system names
    (:data:`SYSTEM_DEVICES`: ``h100_sxm``), then any name ``-H`` accepts for a shipped device
    (``H20``, ``h20``, ``mi300x``, ``rtx-4090``), with ``_`` read as ``-`` and an ``_sxm`` /
    ``-sxm`` suffix dropped where the name with it names nothing (``h20_sxm`` is H20). A file
    path or a ``measured:`` set is no system."""
    if system in SYSTEM_DEVICES:
        return SYSTEM_DEVICES[system]
    text = system.strip()
    if not text or "/" in text or os.sep in text or ":" in text or text.startswith("."):
        return None
    tries = [text, text.replace("_", "-")]
    for word in list(tries):
        if word.lower().endswith("-sxm"):
            tries.append(word[:-4])
    shipped = {n.lower(): n for n in shipped_hardware()}
    for word in tries:
        if word.lower() in shipped:
            return shipped[word.lower()]
        try:
            name = load_hardware(word).name
        except MlacalcError:
            continue
        if name.lower() in shipped:
            return shipped[name.lower()]
    return None


def canonical_system(system: str, device: str) -> str:
    """The collector's system name (:data:`SYSTEM_DEVICES`) of a folder's ``device`` where it
    has one, else the folder's name: a table's rules per device (the mapping's kernel choices,
    its host floors) are keyed by the collector's names, so a folder named after a catalogue
    device (``A100-SXM-80GB/``, ``H100-SXM/``) is read as the collector's (``a100_sxm``) and
    predicts as it does."""
    if system in SYSTEM_DEVICES:
        return system
    return next((s for s, d in SYSTEM_DEVICES.items() if d == device), system)


class UnknownSystemError(KeyError, MlacalcError):
    """A measured set's system folder that names no device in the hardware catalogue."""

    def __init__(self, system: str, source: str):
        self.system, self.source = system, source
        super().__init__(system)

    def __str__(self) -> str:
        return (
            f"{self.source}: system folder '{self.system}' names no device in the hardware "
            f"catalogue; name the <system> folder after a catalogue device (any name -H "
            f"accepts: {', '.join(shipped_hardware())}; or aiconfigurator's "
            f"{', '.join(SYSTEM_DEVICES)}); mlacalc list --hardware shows them"
        )


@dataclass(frozen=True)
class MeasuredTable:
    """One measured table: columns as numpy arrays and the measured seconds of every row.

    ``table`` is the table name (``gemm_perf``, ``generation_attention_perf``, ... or
    ``bench`` for a microbenchmark set); ``system`` the collector's system folder (or the
    microbenchmark's device name); ``device`` the hardware catalogue name (or
    ``measured:<set>`` for a microbenchmark set, whose device is its measured ceilings);
    ``engine`` the serving engine whose kernels the table timed (:mod:`mlacalc.words.engines`;
    ``""`` for a library every engine calls, NCCL or DeepEP, and for a microbenchmark set).
    """

    table: str
    system: str
    device: str
    family: str
    framework: str
    version: str
    provenance: str
    source: str
    columns: dict[str, np.ndarray]
    seconds: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict, compare=False)
    engine: str = SHARED

    def __len__(self) -> int:
        return int(self.seconds.shape[0])

    def column(self, name: str) -> np.ndarray:
        """A column by name; a missing column is an error naming the table and column."""
        try:
            return self.columns[name]
        except KeyError:
            raise ConfigError(
                f"has no column '{name}' (columns: {', '.join(self.columns)})",
                source=self.source,
                field=name,
            ) from None

    @property
    def label(self) -> str:
        return f"{self.system}/{self.table}"


@dataclass(frozen=True)
class MeasuredSet:
    """Measured tables read from one or more paths."""

    tables: tuple[MeasuredTable, ...]
    paths: tuple[str, ...]

    def __len__(self) -> int:
        return sum(len(t) for t in self.tables)

    def systems(self) -> list[str]:
        return sorted({t.system for t in self.tables})

    def table(self, name: str, system: str | None = None) -> MeasuredTable:
        """The table called ``name`` (of ``system`` when several systems are loaded)."""
        found = [
            t for t in self.tables if t.table == name and (system is None or t.system == system)
        ]
        if len(found) != 1:
            have = ", ".join(sorted({t.label for t in self.tables}))
            what = (
                "is not in this measured set"
                if not found
                else "is in several systems; pass system="
            )
            raise ConfigError(what, source=", ".join(self.paths), field=name, fix=f"tables: {have}")
        return found[0]


def _pyarrow():
    try:
        # deferred: pyarrow is the optional measured extra (pip install 'mlacalc[measured]')
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - depends on the environment
        raise MlacalcError(
            "reading aiconfigurator parquet tables needs pyarrow: pip install 'mlacalc[measured]'"
        ) from None
    return pq


#: What a ``collection_meta.yaml`` holds, said by the errors about one.
_META_NEEDS = (
    "a table folder's collection_meta.yaml needs runtime.framework and runtime.version "
    "(e.g. 'runtime: {framework: trtllm, version: 1.3.0rc20}')"
)


def _read_meta(path: Path) -> dict[str, Any]:
    """``collection_meta.yaml`` through the bounded safe reader (:mod:`mlacalc.words.safeio`)."""
    text = read_text(path, limit=_META_LIMIT, what="collection_meta.yaml files")
    if not text.strip():  # the YAML reader's "is empty" offered a model file's fix
        raise ConfigError("is empty", source=str(path), field="runtime", fix=_META_NEEDS)
    data = parse_data(text, str(path), json_text=False)
    if not isinstance(data, dict):
        raise ConfigError(
            "must hold a mapping (schema_version, runtime, tables)",
            source=str(path),
            fix=_META_NEEDS,
        )
    runtime = data.get("runtime")
    if not isinstance(runtime, dict) or "framework" not in runtime or "version" not in runtime:
        raise ConfigError(
            "is missing runtime.framework / runtime.version",
            source=str(path),
            field="runtime",
            fix=_META_NEEDS,
        )
    for name in ("framework", "version"):
        if not isinstance(runtime[name], (str, int, float)) or isinstance(runtime[name], bool):
            raise ConfigError("must be text", source=str(path), field=f"runtime.{name}")
    tables = data.get("tables")
    if tables is not None and (
        not isinstance(tables, dict) or not all(isinstance(v, dict) for v in tables.values())
    ):
        # a list here was an AttributeError
        raise ConfigError("must map table names to their status", source=str(path), field="tables")
    return data


def _arrow_column(col, name: str, source: str) -> np.ndarray:
    """One arrow column as a numpy array: numbers as int64 or float64 (a missing value NaN),
    text through its dictionary (fast on big tables; a dictionary-encoded column, as pandas
    writes a category, is read the same; a missing value ""). A column of another type, or of
    the wrong one of the two for its name (:data:`NUMBER_COLUMNS`, :data:`TEXT_COLUMNS`), is
    one line naming the file and the column (it printed the column's data)."""
    # deferred: pyarrow is the optional measured extra
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = col.type
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
        col = pc.cast(col, kind)
    text = pa.types.is_string(kind) or pa.types.is_large_string(kind)
    number = pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)
    want = "numbers" if name in NUMBER_COLUMNS else "text" if name in TEXT_COLUMNS else ""
    if not (text or number) or (want == "numbers" and text) or (want == "text" and number):
        raise ConfigError(
            f"holds {str(kind)[:60]}; this column holds {want or 'numbers or text'}",
            source=source,
            field=name,
            fix="write the table with the column's type as aiconfigurator's collectors do",
        )
    if text:
        enc = pc.dictionary_encode(pc.fill_null(col, "")).combine_chunks()
        words = np.asarray(enc.dictionary.to_pylist(), dtype=str)
        codes = enc.indices.to_numpy(zero_copy_only=False)
        return words[codes] if len(words) else np.zeros(len(codes), dtype=str)
    if pa.types.is_boolean(kind):
        col = pc.cast(col, pa.int64())
    if col.null_count:  # a missing number is NaN
        return pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False)
    return np.asarray(col.to_numpy(), dtype=np.float64 if pa.types.is_floating(kind) else np.int64)


def _system_of(leaf: Path) -> tuple[str, str]:
    """(system, family) of a leaf folder ``<system>/<family>/<framework>/<version>``."""
    full = leaf.resolve()
    parts = full.parts[1:] if full.anchor else full.parts  # the root ('/') names no system
    if len(parts) < 4:
        raise ConfigError(
            "is not inside a <system>/<family>/<framework>/<version> folder",
            source=str(leaf),
            fix="pass the system folder or a file inside its layout",
        )
    return parts[-4], parts[-3]


#: GPU name fragments (as CUDA reports them, and as the collectors write a table's ``device``
#: column) -> catalogue device; the first match wins (H200 before H20).
GPU_NAMES = (
    (("H100", "PCIE"), "H100-PCIe"), (("H100",), "H100-SXM"), (("H200",), "H200"),
    (("H800",), "H800"), (("H20",), "H20"), (("GB200",), "GB200"), (("GB300",), "GB300"),
    (("B200",), "B200"), (("B300",), "B300"), (("A100", "PCIE"), "A100-PCIe-40GB"),
    (("A100",), "A100-SXM-80GB"), (("A30",), "A30"), (("L40S",), "L40S"), (("L4",), "L4"),
    (("4090",), "RTX-4090"), (("4080",), "RTX-4080"), (("PRO 6000",), "RTX-PRO-6000-Server"),
    (("MI300X",), "MI300X"), (("MI325X",), "MI325X"), (("MI355X",), "MI355X"),
)  # fmt: skip


def gpu_device(name: str) -> str | None:
    """The catalogue device of a GPU's name (``NVIDIA H100 80GB HBM3`` -> ``H100-SXM``), else
    None."""
    upper = str(name).upper()
    for parts, entry in GPU_NAMES:
        # whole words: L4 is not the L40S, H20 not the H200, B200 not the GB200
        if all(re.search(rf"(?<![A-Z0-9]){re.escape(p)}(?![A-Z0-9])", upper) for p in parts):
            return entry
    return None


def _check_columns_match_folder(
    words: dict[str, list[str]], device: str, system: str, engine: str, meta_framework: str,
    source: str,
) -> None:  # fmt: skip
    """Refuse a table whose own ``device`` column names another catalogue device than its
    system folder, or whose ``framework`` column names another engine than its
    ``collection_meta.yaml`` (a table of the shared libraries, NCCL or DeepEP, is collected
    under any engine: not checked). Refused, not warned: every row would be fitted or scored
    as the folder's device or engine, a label no later step can undo. A device name mlacalc
    does not match to the catalogue is not checked. ``words``: the distinct values of the
    table's text columns ``device`` and ``framework`` (:func:`_distinct_words`)."""
    if "device" in words:
        for name in sorted(set(words["device"]) - {""}):
            theirs = gpu_device(name)
            if theirs is not None and theirs != device:
                raise ConfigError(
                    f"has rows timed on {name[:40]!r} ({theirs}) in the folder of system "
                    f"'{system}' ({device})",
                    source=source,
                    field="device",
                    fix=f"put the table under a <system> folder of {theirs} (e.g. {theirs}/)",
                )
    if engine == SHARED or "framework" not in words:
        return
    for name in sorted(set(words["framework"]) - {""}):
        theirs = engine_of_framework(name)
        if theirs not in (None, SHARED, engine):
            raise ConfigError(
                f"has rows timed under {name[:20]!r} ({theirs}) while its collection_meta.yaml "
                f"says runtime.framework {meta_framework!r} ({engine})",
                source=source,
                field="framework",
                fix=f"put the table in a folder whose collection_meta.yaml names {theirs}",
            )


def _distinct_words(arrow, cols: dict[str, np.ndarray], names) -> dict[str, list[str]]:
    """The distinct values of the text columns ``names`` of a table read as ``cols`` from
    ``arrow`` (a missing value ""), found by arrow on its own column (speed only: a set of a
    150,000-row numpy column's values took 10-15 ms)."""
    # deferred: pyarrow is the optional measured extra
    import pyarrow.compute as pc

    return {
        name: ["" if w is None else str(w) for w in pc.unique(arrow.column(name)).to_pylist()]
        for name in names
        if name in cols and cols[name].dtype.kind == "U"
    }


def _read_parquet(path: Path, meta: dict[str, Any]) -> list[MeasuredTable]:
    pq = _pyarrow()
    system, family = _system_of(path.parent)
    device = system_device(system)
    if device is None:
        raise UnknownSystemError(system, str(path))
    try:
        arrow = pq.read_table(path)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot be read as parquet ({exc})", source=str(path)) from None
    name = path.stem
    cols = {c: _arrow_column(arrow.column(c), c, str(path)) for c in arrow.column_names}
    runtime = meta["runtime"]
    engine = engine_of_framework(str(runtime["framework"]))
    if engine is None:
        raise ConfigError(
            f"names framework '{runtime['framework']}', whose engine mlacalc does not know",
            source=str(path.parent / "collection_meta.yaml"),
            field="runtime.framework",
            fix="use trtllm, sglang, vllm, nccl or wideep_sglang",
        )
    words = _distinct_words(arrow, cols, ("device", "framework"))
    _check_columns_match_folder(words, device, system, engine, str(runtime["framework"]), str(path))
    common: dict[str, Any] = {
        "engine": engine,
        # the collector's name of the device where it has one (A100-SXM-80GB/ reads as
        # a100_sxm/): the mapping's and the host floors' rules per device are keyed by it
        "system": canonical_system(system, device),
        "device": device,
        "family": family,
        "framework": str(runtime["framework"]),
        "version": str(runtime["version"]),
        "provenance": str(meta.get("provenance", "")),
        "source": str(path),
        "meta": {"status": (meta.get("tables") or {}).get(name, {})},
    }
    if name in _TIME_COLUMNS:
        parts = _TIME_COLUMNS[name]
        n = arrow.num_rows
        for _, colname, _ in parts:
            if colname not in cols:
                raise ConfigError("is missing", source=str(path), field=colname)
        long = {c: np.concatenate([v] * len(parts)) for c, v in cols.items()}
        long["measure"] = np.repeat(np.array([p[0] for p in parts]), n)
        long["row"] = np.tile(np.arange(n), len(parts))
        seconds = np.concatenate([cols[c].astype(np.float64) * f for _, c, f in parts])
        return [MeasuredTable(table=name, columns=long, seconds=seconds, **common)]
    if "latency" not in cols:
        raise ConfigError("has no latency column", source=str(path), field="latency")
    seconds = cols["latency"].astype(np.float64) * 1e-3  # latency is ms per call
    return [MeasuredTable(table=name, columns=cols, seconds=seconds, **common)]


def _leaf_files(root: Path) -> list[Path]:
    """Every ``*.parquet`` under ``root`` whose folder has a ``collection_meta.yaml``."""
    files = sorted(root.rglob("*.parquet"))
    if not files:
        raise ConfigError(
            "holds no *.parquet tables",
            source=str(root),
            fix="pass an aiconfigurator <system> folder, a folder below it, or a .parquet",
        )
    for f in files:
        if not (f.parent / "collection_meta.yaml").is_file():
            raise ConfigError(
                "has no collection_meta.yaml beside it",
                source=str(f),
                fix="keep the aiconfigurator layout: every table folder has its meta file",
            )
    return files


def bench_time_text(r: dict[str, Any], rows_path: Path, line: int) -> None:
    """Refuse an ``ok`` row of a microbenchmark set whose ``median_s`` is text ("12 ms"),
    naming the file, line and column (as a kernel set's cell is); an empty cell is left to be
    counted as a time that is not a number."""
    text = str(r.get("median_s") or "").strip()
    if r.get("status") != "ok" or not text:
        return
    try:
        float(text)
    except ValueError:
        raise ConfigError(
            f"line {line}: {text[:20]!r} is not a number",
            source=str(rows_path),
            field="median_s",
            fix="write the time in seconds as a number, as mlacalc bench does",
        ) from None


def _float_or_nan(text: Any) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


#: What a measured-set argument may be, said by every error about one.
MEASURED_INPUTS = (
    "pass aiconfigurator parquet tables (a .parquet file, or a folder of them with "
    "collection_meta.yaml beside each) or the .json that mlacalc bench wrote (a CSV is read "
    "only as the rows_file that .json names)"
)


def bench_sidecar(path: str | os.PathLike) -> tuple[Path, dict[str, Any]]:
    """The ``mlacalc bench`` sidecar of a microbenchmark ``.json`` or its ``.csv``, read and
    checked (:func:`~mlacalc.hardware.catalogue.read_sidecar`), with its content. A CSV with
    no sidecar beside it, or whose sidecar names another rows file, is one line naming the CSV
    (it named the ``.json`` the user never gave)."""
    given = Path(path)
    if given.suffix.lower() != ".csv":
        return given, read_sidecar(given)
    if not given.is_file():
        raise ConfigError("no such file", source=str(given), fix=MEASURED_INPUTS)
    side = given.with_suffix(".json")
    if not side.is_file():
        raise ConfigError(
            f"is a CSV with no bench sidecar {side.name} beside it",
            source=str(given),
            fix=MEASURED_INPUTS,
        )
    meta = read_sidecar(side)
    if Path(str(meta["rows_file"])).name != given.name:
        raise ConfigError(
            f"is not the rows file of {side.name} "
            f"(its rows_file is {str(meta['rows_file'])[:60]!r})",
            source=str(given),
            fix=f"pass {side.name} itself",
        )
    return side, meta


def read_bench_set(path: str | os.PathLike) -> MeasuredTable:
    """A microbenchmark set (``mlacalc bench`` ``.json`` sidecar or its ``.csv``) as one table.

    Its rows are whole attention layers timed by the microbenchmark; the device is the set's
    own measured ceilings (``measured:<set>``). Rows whose ``status`` is not ``ok`` keep a NaN
    time and are reported as not predicted by that status.
    """
    p, meta = bench_sidecar(path)
    if meta.get("preset") == "calibrate":
        raise ConfigError(
            "is a kernel set (mlacalc bench --preset calibrate), not a run of attention layers",
            source=str(p),
            field="preset",
            fix="fit on it with mlacalc calibrate, or predict its kernels with mlacalc validate "
            "--measured (validate(measured=...))",
        )
    rows_path = p.parent / str(meta["rows_file"])
    try:
        with open(rows_path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            names = list(reader.fieldnames or [])
            raw = list(reader)
    except OSError as exc:
        raise ConfigError(
            f"cannot be read ({exc.strerror or exc})", source=str(rows_path)
        ) from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(
            f"is not a CSV text file ({str(exc)[:80]})",
            source=str(rows_path),
            fix="pass files written by mlacalc bench",
        ) from None
    for need in ("model", "impl", "phase", "batch", "seq_len", "dtype", "status", "median_s"):
        if need not in names:
            raise ConfigError(
                "is not an mlacalc.bench/1 rows file",
                source=str(rows_path),
                field=need,
                fix="pass files written by mlacalc bench",
            )
    cols: dict[str, np.ndarray] = {}
    for n in names:
        values = [r[n] or "" for r in raw]  # a short row reads None for its missing cells
        try:
            cols[n] = np.array([int(v) for v in values], dtype=np.int64)
        except ValueError:
            try:
                cols[n] = np.array([float(v) if v else np.nan for v in values], dtype=np.float64)
            except ValueError:
                cols[n] = np.array(values, dtype=str)
    # text in an ok row's time is one line naming its line, as calibrate's kernel sets say it
    # (an empty cell, NaN or inf is a number the check counts as not predicted, not scored)
    for i, r in enumerate(raw, start=2):
        bench_time_text(r, rows_path, i)
    times = np.array([_float_or_nan(r["median_s"]) for r in raw], dtype=np.float64)
    seconds = np.where(cols["status"] == "ok", times, np.nan)
    device = meta["device"]
    return MeasuredTable(
        table="bench",
        system=str(device.get("name", p.stem)),
        device=f"measured:{p.stem}",
        family="bench",
        framework="mlacalc.bench",
        version=str(meta.get("schema")),
        provenance="collected",
        source=str(p),
        columns=cols,
        seconds=seconds,
        meta={"sidecar": str(p), "preset": meta.get("preset")},
    )


def _digest_arrays(named: list[tuple[str, Any]]) -> str:
    digest = hashlib.sha256()
    for name, values in named:
        array = np.ascontiguousarray(np.asarray(values))
        digest.update(f"{name}\0{array.dtype.str}\0{array.shape}\0".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()[:16]


def table_digest(table: Any) -> str:
    """A digest of a measured table's content: its columns (by name, sorted) and measured
    seconds, not where it lies. A profile records the digests of the tables it was fitted on
    (``fitted_on[].contents``) and validate refuses the same content (a held-out table of the
    same device and name, other rows, is validated); a copy of a table, or the table written
    again, has the same digest."""
    cols = getattr(table, "columns", {})
    return _digest_arrays([*sorted(cols.items()), ("seconds", table.seconds)])


def observations_digest(obs: Any) -> str:
    """A digest of fitting observations' content (a kernel set's class, or observations given
    as such): their kernels' work and shape and measured seconds."""
    b = obs.batch
    named = [("flops", b.flops), ("bytes", b.bytes), ("calls", b.calls)]
    return _digest_arrays([*named, *sorted(b.shape.items()), ("seconds", obs.seconds)])


def measured_fingerprint(paths: Any) -> str:
    """A digest of the content of measured sets (a path or a list; a folder by every file
    below it, in sorted order, names and bytes): a cache keyed by it reads a set again when a
    file changes, even within the same second (a cache keyed by path or modification time
    answered with the old one). A path that does not exist adds its name only."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths or ())
    digest = hashlib.sha256()
    for item in items:
        p = Path(os.fspath(item)).expanduser()
        files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
        for f in files:
            digest.update(str(f).encode("utf-8", "replace") + b"\0")
            try:
                digest.update(f.read_bytes())
            except OSError:
                digest.update(b"\1")
    return digest.hexdigest()


def _path_list(paths: Any) -> list:
    """Several paths: a list or tuple (anything else is refused by name)."""
    if not isinstance(paths, (list, tuple)):
        raise InvalidArgumentError(
            "measured",
            f"must be a path or a list of paths, got {type(paths).__name__}; pass an "
            "aiconfigurator system folder, a parquet file or a bench .json",
        )
    return list(paths)


def engine_of_named_tables(paths: Any, engine: str | None) -> str | None:
    """The engine to read ``paths`` as: ``engine`` checked against the parquet files named
    alone, whose ``collection_meta.yaml`` names the engine that timed them. A file of another
    engine than one given is refused (a vLLM table fitted or validated as TensorRT-LLM's was
    labelled so without a word); none given, the files' one engine (else the default)."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else paths
    named: dict[str, str] = {}
    for item in items if isinstance(items, (list, tuple)) else ():
        if not isinstance(item, (str, os.PathLike)) or not str(item).strip():
            continue
        p = Path(item).expanduser()
        meta = p.parent / "collection_meta.yaml"
        if p.suffix != ".parquet" or not p.is_file() or not meta.is_file():
            continue
        mine = engine_of_framework(str(_read_meta(meta)["runtime"]["framework"]))
        if mine not in (None, SHARED):
            named[str(p)] = mine
    if engine is None or str(engine).strip().lower() == ALL_ENGINES:
        engines = sorted(set(named.values()))
        if len(engines) > 1 and engine is None:  # one profile would be labelled one of them
            raise ConfigError(
                f"hold tables of {len(engines)} engines ({', '.join(engines)}; their "
                "collection_meta.yaml says so), which one profile cannot be",
                source=", ".join(sorted(named)),
                field="engine",
                fix="name one engine's tables at a time, each with its --engine",
            )
        return engines[0] if len(engines) == 1 else engine
    want = check_engine(engine)
    for path, mine in named.items():
        if mine != want:
            raise ConfigError(
                f"holds {mine} tables (its collection_meta.yaml says so), not engine {want}'s",
                source=path,
                field="engine",
                fix=f"pass --engine {mine}, or leave --engine out",
            )
    return engine


def holds_tables_of(path: str | os.PathLike, engine: str) -> bool:
    """Whether the aiconfigurator folder (or parquet file) ``path`` holds a table of ``engine``
    itself, not only tables every engine shares (read from its ``collection_meta.yaml`` files,
    not its tables); False where it holds none or cannot be read."""
    p = Path(path)
    try:
        metas = (
            [p.parent / "collection_meta.yaml"] if p.is_file() else p.rglob("collection_meta.yaml")
        )
        for meta in metas:
            if engine_of_framework(str(_read_meta(meta)["runtime"]["framework"])) == engine:
                return True
    except (MlacalcError, OSError, KeyError, TypeError):
        return False
    return False


def load_measured(
    paths: str | os.PathLike | list[str | os.PathLike], *, engine: str | None = None
) -> MeasuredSet:
    """Read measured tables from one or more paths.

    A path is an aiconfigurator ``<system>`` folder, any folder below it, one ``*.parquet`` file
    (each with ``collection_meta.yaml`` beside it), or a microbenchmark ``.json``/``.csv``.
    ``engine`` keeps the tables of one engine and those every engine shares (NCCL, DeepEP;
    default: :data:`~mlacalc.words.engines.DEFAULT_ENGINE`); ``"all"`` keeps every table. A
    parquet file named alone is read whatever its engine. Folders are read file by file in
    sorted order, so a folder's tables come in one order on every machine.
    """
    want = check_engine(engine, allow_all=True)
    items = [paths] if isinstance(paths, (str, os.PathLike)) else _path_list(paths)
    if not items:
        raise ConfigError(
            "no measured set given",
            source="measured",
            fix="pass an aiconfigurator system folder, a parquet file or a bench .json",
        )
    tables: list[MeasuredTable] = []
    for i, item in enumerate(items):
        if not isinstance(item, (str, os.PathLike)) or not os.fspath(item).strip():
            # '' is no path: Path('') is the working directory, which was read as a set
            raise InvalidArgumentError(
                "measured" if len(items) == 1 else f"measured[{i}]",
                f"must be the path of a measured set, got {str(item)[:40]!r}; pass an "
                "aiconfigurator system folder, a parquet file or a bench .json",
            )
        p = Path(item).expanduser()
        if not p.exists():
            raise ConfigError(
                "no such file or folder",
                source=str(p),
                fix=MEASURED_INPUTS,
            )
        if p.is_file() and p.suffix.lower() in (".json", ".csv"):
            tables.append(read_bench_set(p))
            continue
        if p.is_file() and p.suffix != ".parquet":
            raise ConfigError("is not a measured set", source=str(p), fix=MEASURED_INPUTS)
        files = [p] if p.is_file() else _leaf_files(p)
        metas: dict[Path, dict[str, Any]] = {}
        before, skipped, own = len(tables), set(), 0
        for f in files:
            meta_path = f.parent / "collection_meta.yaml"
            if not meta_path.is_file():
                raise ConfigError("has no collection_meta.yaml beside it", source=str(f))
            if f.parent not in metas:
                metas[f.parent] = _read_meta(meta_path)
            framework = str(metas[f.parent]["runtime"]["framework"])
            mine = engine_of_framework(framework)
            if not p.is_file() and want != ALL_ENGINES and mine not in (want, SHARED, None):
                skipped.add(mine)
                continue
            tables.extend(_read_parquet(f, metas[f.parent]))
            own += mine == want
        if len(tables) == before or (skipped and not own):
            # a folder of other engines' tables and the shared ones (NCCL) alone: those are
            # no validation of this engine (a100_sxm under --engine sglang read as SGLang)
            # (a review: "holds ... only tables every engine shares (it holds: trtllm)")
            shared = " and ones every engine shares (NCCL)" if len(tables) > before else ""
            theirs = " and ".join(e + "'s" for e in sorted(skipped))
            raise ConfigError(
                f"holds no tables of engine '{want}': its tables are {theirs}{shared}",
                source=str(p),
                field="engine",
                fix=(
                    f"pass --engine {sorted(skipped)[0]} (engine='{sorted(skipped)[0]}' in Python)"
                    if len(skipped) == 1
                    else f"pass --engine one of {', '.join(sorted(skipped))} (engine= in Python)"
                ),
            )
    return MeasuredSet(tables=tuple(tables), paths=tuple(str(i) for i in items))
