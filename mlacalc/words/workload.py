"""What one step is asked: the workload record the cost engine, the model step and the time
model pass along instead of a clump of parameters.

The fields come in one order everywhere: the phase, the keys the last query attends
(``seq_len``), the sequences (``batch``), the new tokens per sequence (``q_len``: ``None`` for
prefill and decode, which fix it), the MLA implementation (``None``: what serving engines run),
whether to count only the pairs a causal kernel needs, and the dtypes of the cache, the
weights (``None``: the model's) and the activations.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

__all__ = ["Workload"]


@dataclass(frozen=True)
class Workload:
    """One step's request (see the module docs). ``kv_dtype`` is a dtype name, a bit width or
    a :class:`~mlacalc.words.dtypes.KVLayout`; the cost engine checks every field."""

    phase: str
    seq_len: int
    batch: int = 1
    q_len: int | None = None
    impl: str | None = None
    causal: bool = False
    kv_dtype: Any = "bf16"
    weight_dtype: str | None = None
    act_dtype: str = "bf16"

    def with_changes(self, **changes: Any) -> Workload:
        """The same request with some fields changed."""
        return replace(self, **changes)
