"""A measured table mapped onto kernels: the records :mod:`~mlacalc.measured.mapping` builds
and :mod:`~mlacalc.measured.quirks` marks, and the table dtype labels as kernel dtypes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlacalc.hardware.catalogue import MEASURED_SYSTEMS
from mlacalc.measured.tables import MeasuredTable
from mlacalc.timemodel.gemm_time import BLOCK_STAND_IN, QUANT_SM_BOUND_ENGINES
from mlacalc.timemodel.host_floor import call_seconds, floors_measured, host_floor_seconds
from mlacalc.words.kernels import Kernel, KernelBatch, variant_of

__all__ = [
    "NOT_MODELLED",
    "SIZE_COLUMNS",
    "KernelPart",
    "KernelSlots",
    "MappedTable",
    "canon_dtypes",
    "distinct_kernels",
    "reason_values",
]

#: Columns of aiconfigurator's tables that hold a size (a count of tokens, heads, rows of a
#: GEMM ...): a row where one is 0, negative or missing is not predicted, reason
#: ``<column>_not_positive`` (:func:`mlacalc.measured.mapping.size_faults`). Every shipped
#: table holds at least 1 in each; the columns that may be 0 (``step``, ``window_size``, the
#: DeepEP notify times) and the times are not among them.
SIZE_COLUMNS = (
    "m", "n", "k", "batch_size", "beam_width", "chunk_size", "d_conv", "d_model", "d_state",
    "head_dim", "head_k_dim", "head_v_dim", "hidden_size", "inter_size", "isl",
    "local_num_heads", "message_size", "n_groups", "nheads", "num_experts", "num_heads",
    "num_k_heads", "num_key_value_heads", "num_token", "num_tokens", "num_topk", "num_v_heads",
    "seq_len", "topk",
)  # fmt: skip

#: Reasons a row is not predicted, with what they mean.
NOT_MODELLED: dict[str, str] = {
    **{f"{c}_not_positive": f"a {c} of 0, below 0 or missing: no kernel" for c in SIZE_COLUMNS},
    "unknown_dtype": "a dtype the kernel vocabulary has no class for",
    "zero_time": "a measured time of zero (a difference floored at zero)",
    "time_negative": "a measured time below zero: a fault of the table (bench: time zero or "
    "negative)",
    "time_not_finite": "a measured time that is NaN or infinite (bench: time not finite)",
    "status": "the microbenchmark recorded this row as not ok",
    "spike": "an isolated spike against both sweep neighbours (quirk rule)",
    "faster_than_hbm": "moves more bytes per second than HBM allows (quirk rule)",
    "slower_than_more_work": "a MoE row over 2x a row whose GPU does more (quirk rule)",
    "no_time_model": "the time model has no parameters for this kernel class",
    "work_not_finite": "shape columns whose FLOPs or bytes overflow (no finite work)",
    "not_mapped": "a table mlacalc reads but does not map onto kernels (mapping.UNMAPPED)",
}


def reason_values(table: Any, rows: np.ndarray, why: str) -> str:
    """What the table's rows ``rows`` (a mask) hold that gave them reason ``why``, in words:
    the dtype columns' values of ``unknown_dtype`` rows (``gemm_dtype 'bf17'``), the size
    column's values of ``<column>_not_positive`` rows (``m 0, -4``); "" for another reason."""
    cols = getattr(table, "columns", {})
    if why == "unknown_dtype":
        names = [c for c in cols if c.endswith("_dtype") and cols[c].dtype.kind == "U"]
    elif why.endswith("_not_positive") and why[: -len("_not_positive")] in cols:
        names = [why[: -len("_not_positive")]]
    else:
        return ""
    said = []
    for name in names:
        values = list(dict.fromkeys(cols[name][rows].tolist()))
        shown = ", ".join(repr(v[:20]) if isinstance(v, str) else f"{v:g}" for v in values[:3]) + (
            " ..." if len(values) > 3 else ""
        )
        said.append(f"{name} {shown}")
    return "; ".join(said)


@dataclass(frozen=True)
class KernelPart:
    """Kernels of one class for a subset of rows: ``rows[i]`` is the row of kernel ``i``."""

    name: str
    rows: np.ndarray
    batch: KernelBatch


@dataclass
class MappedTable:
    """A measured table as kernels: parts, the measured seconds, and why rows are left out."""

    table: MeasuredTable
    parts: list[KernelPart]
    reason: np.ndarray  # "" where the row is predicted
    flags: dict[str, np.ndarray] = field(default_factory=dict)
    rules: list[str] = field(default_factory=list)  # quirk rules applied, in words
    #: per row, the host's dispatch time of a module launched eagerly (NaN where none): the
    #: row's prediction is the larger of it and its kernels' sum (mlacalc.timemodel.host_floor)
    host_s: np.ndarray | None = None
    #: the labels the host floor is looked up by (``kernel_source`` as grouped, ``gemm_type``,
    #: ``kv_cache_dtype``; ``None`` for a table without the column), to look it up under
    #: another device's floors (:meth:`host_floor_for`)
    host_groups: tuple | None = None

    @property
    def seconds(self) -> np.ndarray:
        return self.table.seconds

    @property
    def modelled(self) -> np.ndarray:
        return self.reason == ""

    def floors_from(self, fitted_devices=()) -> str | None:
        """The measured system whose host floors a profile fitted on ``fitted_devices`` gives
        the rows: the table's own where the profile saw the table's device (or names none),
        else the first of its devices with floors of the engine's table (None if none has): a
        device the fit never saw takes no floor of its own measuring
        (mlacalc.timemodel.host_floor)."""
        t = self.table
        if not fitted_devices or t.device in fitted_devices:
            return t.system
        systems = [s for d in fitted_devices for s, dev in MEASURED_SYSTEMS.items() if dev == d]
        measured = [s for s in systems if floors_measured(s, t.engine, t.table)]
        return measured[0] if measured else None

    def host_floor_for(self, fitted_devices=()) -> np.ndarray | None:
        """The rows' host floors as a profile fitted on ``fitted_devices`` predicts them (the
        system :meth:`floors_from` names; NaN, none, where it names none)."""
        t = self.table
        if self.host_s is None or self.host_groups is None:
            return self.host_s
        system = self.floors_from(fitted_devices)
        if system == t.system:
            return self.host_s
        if system is None:  # no fitted device's floors of this engine's table: none
            return np.full(len(t), np.nan)
        return host_floor_seconds(t.system, t.engine, t.table, *self.host_groups,
                                  floors_of=system)  # fmt: skip

    def call_for(self, fitted_devices=()) -> np.ndarray | None:
        """The rows' seconds of the module's call beyond its kernels
        (:data:`~mlacalc.timemodel.host_floor.SEQUENCE_DOUBLING_S` of an eager call and
        :data:`~mlacalc.timemodel.host_floor.WIDE_BATCH_S` of a call past
        :data:`~mlacalc.timemodel.host_floor.WIDE_BATCH_SEQUENCES` sequences) where a profile
        fitted on ``fitted_devices`` saw the table's device (or names none): the figures are
        fitted against that device's own classes, so a device predicted from another's fit
        takes none (None)."""
        t = self.table
        if self.host_groups is None or (fitted_devices and t.device not in fitted_devices):
            return None
        return call_seconds(t.system, t.engine, t.table, self.host_groups[3])

    def with_host_floor(self, kernel_s: np.ndarray, fitted_devices=()) -> np.ndarray:
        """Per-row predictions from the kernels' summed seconds: the larger of them (with the
        eager call's own seconds, :meth:`call_for`, where it has them) and the row's host floor,
        where it has one (as a profile fitted on ``fitted_devices`` sees it:
        :meth:`host_floor_for`)."""
        call = self.call_for(fitted_devices)
        if call is not None:
            kernel_s = kernel_s + call
        floor = self.host_floor_for(fitted_devices)
        if floor is None:
            return kernel_s
        return np.where(np.isfinite(floor), np.maximum(kernel_s, floor), kernel_s)

    def exclude(self, mask: np.ndarray, why: str) -> int:
        """Mark rows (not already excluded) as not predicted for ``why``; returns how many."""
        hit = mask & (self.reason == "")
        self.reason[hit] = why
        if why == "zero_time":  # a time below zero or not finite is no difference floored at 0
            seconds = np.asarray(self.table.seconds, dtype=float)
            self.reason[hit & (seconds < 0)] = "time_negative"
            self.reason[hit & ~np.isfinite(seconds)] = "time_not_finite"
        return int(hit.sum())

    def row_totals(self, field_name: str = "flops") -> np.ndarray:
        """Per-row sum of a kernel field (``flops`` or ``bytes``) times its calls."""
        out = np.zeros(len(self.table))
        for p in self.parts:
            out += np.bincount(
                p.rows,
                weights=getattr(p.batch, field_name) * p.batch.calls,
                minlength=len(self.table),
            )
        return out

    def kernels_of_row(self, row: int) -> list[dict]:
        """The kernels of one row, as dicts (for row-level reports and tests)."""
        out = []
        for p in self.parts:
            for i in np.nonzero(p.rows == row)[0]:
                b = p.batch
                out.append(
                    {
                        "name": p.name,
                        "kind": b.kind,
                        "dtype": b.dtype,
                        "flops": float(b.flops[i]),
                        "bytes": float(b.bytes[i]),
                        "calls": float(b.calls[i]),
                        "shape": {k: float(v[i]) for k, v in b.shape.items()},
                    }
                )
        return out


class KernelSlots:
    """Kernels of module rows built at a few corners of (batch, heads) and interpolated per
    row, gathered by (name, kind, dtype) into one :class:`KernelPart` each (the module tables
    of :mod:`~mlacalc.measured.dsv4_modules` and :mod:`~mlacalc.measured.msa_modules`)."""

    def __init__(self) -> None:
        self._slots: dict[tuple[str, str, str], tuple[list[str], list[int], list[np.ndarray]]]
        self._slots = {}
        self._variants: dict[tuple[str, str, str], str] = {}
        #: rows whose values :meth:`add_corners` keeps until :meth:`interpolate`
        self._pending: dict[tuple[str, str, str], list[tuple[np.ndarray, list]]] = {}

    def name_variant(self, k: Kernel, variant: str) -> None:
        """Time every kernel of ``k``'s slot by the class ``variant`` (a kernel the table's
        engine runs in place of the step's: SGLang's flat-logit top-k)."""
        self._variants[(k.name, k.kind, k.dtype)] = variant

    def fields(self, k: Kernel) -> list[str]:
        """The shape fields of ``k``'s slot (fixed by its first kernel)."""
        return self._slots.setdefault((k.name, k.kind, k.dtype), (sorted(k.shape), [], []))[0]

    def vector(self, k: Kernel) -> np.ndarray:
        """``k`` as one row: FLOPs, bytes, calls and its slot's shape fields."""
        fields = self.fields(k)
        return np.array([k.flops, k.bytes, k.calls, *(k.shape[f] for f in fields)], np.float64)

    def add(self, k: Kernel, rows: np.ndarray, values: np.ndarray) -> None:
        """The rows ``rows`` of the table run ``k``'s slot at ``values`` (one vector a row)."""
        _, idx, vals = self._slots[(k.name, k.kind, k.dtype)]
        idx.extend(rows.tolist())
        vals.append(values)

    def add_corners(self, corners: list[Kernel] | tuple[Kernel, ...], rows: np.ndarray) -> None:
        """The rows ``rows`` of the table run the slot of ``corners[0]`` (one kernel built at
        each corner of the rows' sizes) at values :meth:`interpolate` gives from the corners'
        vectors (:meth:`vector`, as plain numbers until then: speed only, one array a slot
        instead of one a kernel)."""
        k = corners[0]
        fields = self.fields(k)
        vectors = [[c.flops, c.bytes, c.calls, *(c.shape[f] for f in fields)] for c in corners]
        self._pending.setdefault((k.name, k.kind, k.dtype), []).append((rows, vectors))

    def interpolate(
        self,
        combine: Callable[[tuple[str, str, str], np.ndarray, np.ndarray, np.ndarray], np.ndarray],
    ) -> None:
        """Every slot's rows given by :meth:`add_corners`, added (:meth:`add`) in the order
        given at ``combine(slot, rows, corners, which)``: the rows' values from the corners'
        vectors of each call of :meth:`add_corners` (shape ``(calls, corners, fields)``), row
        ``i`` of ``rows`` from ``corners[which[i]]``, element by element (a combine that works
        on the corners before it picks each row's gives the same figures, with less work)."""
        for key, items in self._pending.items():
            rows = np.concatenate([r for r, _ in items])
            corners = np.array([v for _, v in items], dtype=np.float64)
            which = np.repeat(np.arange(len(items)), [len(r) for r, _ in items])
            _, idx, vals = self._slots[key]
            idx.extend(rows.tolist())
            vals.append(combine(key, rows, corners, which))
        self._pending.clear()

    def parts(self, engine: str = "") -> list[KernelPart]:
        """One part per (name, kind, dtype) and class variant: the variant a model step's
        kernel takes from its shape (:func:`~mlacalc.words.kernels.variant_of`: a GEMM of
        several groups is a ``bmm``), row by row, as the step's kernels are batched; the
        table's ``engine`` says whose quantize its block-scaled GEMMs run."""
        out = []
        for (name, kind, dtype), (fields, idx, vals) in self._slots.items():
            v = np.concatenate(vals)
            rows = np.asarray(idx, dtype=np.int64)
            if v.shape[1] > 3:
                _, first, inverse = np.unique(_row_keys(v[:, 3:]), return_index=True,
                                              return_inverse=True)  # fmt: skip
                uniq = v[first, 3:]
            else:
                uniq, inverse = np.zeros((1, 0)), np.zeros(len(v), dtype=np.int64)
            named = self._variants.get((name, kind, dtype))
            names = [named or variant_of(kind, dict(zip(fields, u.tolist()))) for u in uniq]
            per_row = np.asarray(names, dtype=object)[inverse.reshape(-1)]
            for variant in sorted(set(names)):
                at = np.flatnonzero(per_row == variant)
                shape = {f: v[at, 3 + i] for i, f in enumerate(fields)}
                shape["warm_l2"] = np.ones(len(at))  # the collectors never flush the L2
                if kind == "gemm" and dtype == "fp8":
                    # the module's block-scaled GEMMs (``gemm_type`` fp8_block), which the
                    # per-tensor class stands in for (docs/measured-sets.md): not CUTLASS's
                    # per-tensor ``scaled_mm``, whose tiles an engine's own fp8 step takes
                    # (gemm_time.engine_gemm_kernel), but DeepGEMM's kernel, its tiles fed
                    # from shared memory and its output write hidden (gemm_time.BLOCK_STAND_IN)
                    shape["cutlass_dispatch"] = np.zeros(len(at))
                    shape[BLOCK_STAND_IN] = np.ones(len(at))
                    # vLLM's quantize kernels move their bytes per SM and clock
                    # (gemm_time.QUANT_SM_BOUND_ENGINES)
                    sm_bound = float(engine in QUANT_SM_BOUND_ENGINES)
                    shape["quant_sm_bound"] = np.full(len(at), sm_bound)
                batch = KernelBatch(kind=kind, dtype=dtype, flops=v[at, 0], bytes=v[at, 1],
                                    calls=v[at, 2], shape=shape, variant=variant)  # fmt: skip
                out.append(KernelPart(name, rows[at], batch))
        return out


def distinct_kernels(batch: KernelBatch) -> tuple[KernelBatch, np.ndarray]:
    """The distinct kernels of a batch (equal FLOPs, bytes, calls and shape fields: one kernel
    call the time model times alike) and, per kernel, the index of its distinct one: a
    module's GEMM of a given token count recurs in every row of that count (DeepSeek-V3.2's
    projections: 1.4 M kernels, a few thousand shapes), timed once."""
    n = len(batch.flops)
    cols = [np.asarray(c, dtype=np.float64)
            for c in (batch.flops, batch.bytes, batch.calls, *batch.shape.values())]  # fmt: skip
    # a constant column tells no kernel from another
    varying = [c for c in cols if n > 1 and c.min() != c.max()]
    if not varying:
        return batch.take(np.zeros(min(n, 1), dtype=np.int64)), np.zeros(n, dtype=np.int64)
    _, first, inverse = np.unique(_row_keys(np.stack(varying, axis=1)), return_index=True,
                                  return_inverse=True)  # fmt: skip
    return batch.take(first), inverse.reshape(-1)


def _row_keys(table: np.ndarray) -> np.ndarray:
    """One comparable key a row of a float table (its bytes; -0.0 read as 0.0): equal rows,
    equal keys, so one sort finds the distinct rows of every column at once."""
    table = np.ascontiguousarray(table + 0.0)  # -0.0 + 0.0 is 0.0
    return table.view(np.dtype((np.void, table.dtype.itemsize * table.shape[1]))).reshape(-1)


_DT = {
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float16": "fp16",
    "fp16": "fp16",
    "half": "fp16",
    "fp8": "fp8",
    "fp8_block": "fp8_block",
    "int8": "int8",
    "w4a16_mxfp4": "w4a16_mxfp4",
    "nvfp4": "nvfp4",
    "w4a8_mxfp4_mxfp8": "w4a8_mxfp4",
    "int4_wo": "w4a16",
}


def canon_dtypes(col: np.ndarray) -> np.ndarray:
    """Table dtype labels as kernel dtypes (unknown labels become ``"?<label>"``)."""
    out = np.empty(col.shape[0], dtype=object)
    for label in np.unique(col):
        out[col == label] = _DT.get(str(label), f"?{label}")
    return out.astype(str)
