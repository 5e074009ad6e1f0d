"""Where the tests find their reference data: every path is inside the repository.

- ``MEASURED``: NVIDIA's published GPU kernel tables (H100-SXM, A100-SXM), the copy shipped with
  the package in ``mlacalc/data/measured/`` (license, source commit and ``TABLES.md`` beside);
- ``HF_CONFIGS``: real ``config.json`` files of open models, ``tests/data/hf-configs/``
  (``SOURCES.md`` names each file's source);
- ``HF_CONFIGS_2``: the second set, newer families and NVIDIA's NVFP4 / FP8 checkpoints with their
  ``hf_quant_config.json``, ``tests/data/hf-configs-2/`` (``SOURCES.md`` beside);
- ``HF_WRITTEN``: small ``config.json`` files written for the import tests, ``tests/data/hf/``;
- ``benchmark(name)``: a script of ``benchmarks/`` loaded as a module (its helpers under test).

Tests import the names they need (``from reference_data import MEASURED``) instead of building
paths of their own, so no test depends on anything beside the checkout.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from mlacalc.data import MEASURED

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
HF_CONFIGS = TESTS / "data" / "hf-configs"
HF_CONFIGS_2 = TESTS / "data" / "hf-configs-2"
HF_WRITTEN = TESTS / "data" / "hf"

__all__ = ["HF_CONFIGS", "HF_CONFIGS_2", "HF_WRITTEN", "MEASURED", "ROOT", "TESTS", "benchmark"]


def benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` loaded as a module (the scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
