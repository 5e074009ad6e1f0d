"""The data shipped in the repository: every table a shipped profile was fitted on is vendored,
and every vendored data folder keeps its license and source beside it."""

from __future__ import annotations

import json

import pytest
from reference_data import HF_CONFIGS, HF_CONFIGS_2, MEASURED

from mlacalc.data import PROFILES


@pytest.mark.parametrize("path", sorted(PROFILES.glob("*.json")), ids=lambda p: p.stem)
def test_a_shipped_profile_names_the_vendored_tables_it_was_fitted_on(path):
    fitted_on = json.loads(path.read_text())["fitted_on"]
    assert fitted_on, f"{path.name} records no tables"
    for entry in fitted_on:
        assert entry["sources"], f"{path.name}: {entry['device']} names no source table"
        for source in entry["sources"]:
            assert (MEASURED / source).is_file(), f"{path.name}: {source} is not vendored"


@pytest.mark.parametrize(
    "folder,license_name,source_name",
    [
        (MEASURED, "LICENSE-aiconfigurator", "SOURCE_COMMIT"),
        (HF_CONFIGS, "LICENSE-Apache-2.0", "SOURCES.md"),
        (HF_CONFIGS_2, "LICENSE-Apache-2.0", "SOURCES.md"),
    ],
    ids=["measured-tables", "hf-configs", "hf-configs-2"],
)
def test_vendored_data_keeps_its_license_and_source(folder, license_name, source_name):
    assert (folder / license_name).is_file()
    assert (folder / source_name).read_text().strip()
    assert (folder / "README.md").is_file()


@pytest.mark.parametrize("folder", [HF_CONFIGS, HF_CONFIGS_2], ids=["hf-configs", "hf-configs-2"])
def test_every_vendored_config_is_named_in_its_sources(folder):
    sources = (folder / "SOURCES.md").read_text()
    missing = [p.name for p in sorted(folder.glob("*.json")) if p.name not in sources]
    assert not missing, f"configs without a source line in SOURCES.md: {missing}"


def test_every_vendored_table_maps_onto_kernels_or_is_listed_as_not_mapped():
    """Both shared folders are vendored (every system, and every engine's tables on H100 and
    B200), and every table maps onto kernels or is listed with its reason in
    ``mapping.UNMAPPED`` and in docs/measured-sets.md: nothing is dropped silently."""
    from reference_data import ROOT

    from mlacalc.measured.mapping import UNMAPPED, mapped_tables

    systems = {p.name for p in MEASURED.iterdir() if p.is_dir()}
    assert {"a100_sxm", "h100_sxm", "b200_sxm"} <= systems
    for system in ("h100_sxm", "b200_sxm"):
        frameworks = {p.parent.parent.name for p in (MEASURED / system).rglob("*.parquet")}
        assert {"trtllm", "sglang", "vllm", "nccl"} <= frameworks, system
    names = {p.stem for p in MEASURED.rglob("*.parquet")}
    assert not names - set(mapped_tables()) - set(UNMAPPED)
    assert not set(UNMAPPED) & set(mapped_tables())
    docs = (ROOT / "docs" / "measured-sets.md").read_text()
    assert not [name for name in UNMAPPED if f"`{name}`" not in docs]
