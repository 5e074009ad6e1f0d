"""What every view of the app shares: the scenario, cached mlacalc calls, download buttons."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import streamlit as st

import mlacalc
from mlacalc.hardware.catalogue import HardwareSpec
from mlacalc.models.loading import ModelConfig, beyond_positions, parse_upload
from mlacalc.render import grid_rows, human_si, render_json, render_rows_csv
from mlacalc.report import model_report
from mlacalc.words.dtypes import with_state_dtype

from .urlstate import UrlState

MAX_UPLOAD_BYTES = 1 << 20


@dataclass
class Scenario:
    """The sidebar's choices, as every view reads them."""

    model: ModelConfig
    shipped_name: str
    seq_len: int
    batch: int
    kv_dtype: str
    weight_dtype: str
    hardware: str
    device: HardwareSpec
    doc: dict[str, Any]
    url: UrlState
    #: whether the user picked the weight dtype; until then weights are sized in the model's
    #: own format (a quantized checkpoint's exact bytes, scales included)
    weight_chosen: bool = False
    #: the serving engine whose kernels are timed (trtllm, sglang, vllm)
    engine: str = "trtllm"
    #: the dtype a linear or Mamba layer's recurrent state is kept in (None: the model keeps
    #: none)
    state_dtype: str | None = None

    @property
    def cache_layout(self) -> Any:
        """The KV dtype as the counts take it: its name, or its layout with the recurrent
        state's dtype where that is not float32."""
        if self.state_dtype in (None, "fp32"):
            return self.kv_dtype
        return with_state_dtype(self.kv_dtype, self.state_dtype)

    @property
    def sized_weight_dtype(self) -> str | None:
        """The dtype that sizes weights: the user's pick, else None (the model's own format)."""
        return self.weight_dtype if self.weight_chosen else None


@st.cache_data(show_spinner=False)
def load_shipped(name: str) -> ModelConfig:
    return mlacalc.load_model(name)


@st.cache_data(show_spinner=False)
def load_uploaded(raw: bytes, filename: str, quant: bytes | None = None) -> ModelConfig:
    """An uploaded model file, with the ModelOpt ``hf_quant_config.json`` uploaded beside it."""
    return parse_upload(raw, filename, MAX_UPLOAD_BYTES, quant=quant)


@st.cache_data(show_spinner=False)
def report_for(
    model: ModelConfig,
    seq_len: int,
    batch: int,
    kv_dtype: str,
    weight_dtype: str | None,
    state_dtype: str | None = None,
) -> dict:
    return model_report(
        model,
        seq_len=seq_len,
        batch=batch,
        kv_dtype=kv_dtype,
        weight_dtype=weight_dtype,
        state_dtype=state_dtype,
    )


@st.cache_data(show_spinner=False)
def validation() -> list[dict]:
    return [v.to_dict() for v in mlacalc.validate()]


def download(rows: dict | list[dict], name: str, key: str) -> None:
    """CSV and JSON download buttons for a table (exact integers)."""
    data = rows if isinstance(rows, list) else [rows]
    c1, c2 = st.columns(2)
    csv_text = render_rows_csv(data, json_cells=True)
    c1.download_button("CSV", csv_text, f"{name}.csv", "text/csv", key=f"{key}_csv")
    c2.download_button(
        "JSON", render_json(rows), f"{name}.json", "application/json", key=f"{key}_json"
    )


def show_notices(url: UrlState, since: int = 0) -> None:
    """Show the URL notices collected since index ``since``, one warning each."""
    for notice in url.notices[since:]:
        st.warning(notice, icon=":material/link:")


def context_text(model: ModelConfig, seq_len: int) -> str | None:
    """The notice for a context longer than the model's ``max_position_embeddings`` (the
    planner's warning, with what the figures still mean), or None when it is within it."""
    beyond = beyond_positions(model, seq_len)
    if beyond is None:
        return None
    return f"{beyond}: {model.label} was not trained for it; the figures are counted as if it were"


def show_context_warning(sc: Scenario) -> None:
    """Every view counting at the sidebar's context says so when the model was not trained for
    it (the planner says it through its plan's warnings)."""
    text = context_text(sc.model, sc.seq_len)
    if text:
        st.info(text, icon=":material/warning:")


def show_table(
    rows: list[dict[str, Any]], scope: str = "", right: tuple[str, ...] = (), whole: bool = False
) -> None:
    """A data grid: thousands separators, exact text for integers beyond 2^53, a scope line.
    A column empty in every row is left out (the grid would print 'None' in each cell);
    ``right``: text columns aligned as numbers (figures already written with separators);
    ``whole``: every row shown (the grid's own height scrolls past ten), for a table whose
    last rows are its point (a total)."""
    empty = {k for k in (rows[0] if rows else {}) if all(r.get(k) is None for r in rows)}
    shown, kinds = grid_rows([{k: v for k, v in r.items() if k not in empty} for r in rows])
    config = {}
    for column, kind in kinds.items():
        if kind in ("int", "float"):  # thousands separators in the reader's locale
            config[column] = st.column_config.NumberColumn(format="localized")
        elif kind == "exact":
            config[column] = st.column_config.TextColumn(
                alignment="right", help="exact integer (beyond 2^53, shown as text)"
            )
        elif column in right:
            config[column] = st.column_config.TextColumn(alignment="right")
    height: Any = 35 * (len(shown) + 1) + 3 if whole else "auto"  # the grid's 35 px a row
    st.dataframe(shown, hide_index=True, width="stretch", height=height, column_config=config)
    if scope:
        st.caption(scope)


#: The clause a profile's calibration ends with when another engine's kernels stand in for the
#: one asked ("trtllm kernels stand in for sglang: no sglang profile fits this device ...").
_STAND_IN = re.compile(r"(?:; )?(\w+) kernels stand in for (\w+): ([^;]*?)(?=;|$)")


def engine_words(engine: str, profile: str, calibration: str) -> str:
    """Which engine's kernels timed the figures, first: ``engine sglang (trtllm kernels stand
    in: no sglang profile fits this device (profile default)); profile 'default': ...``;
    the stand-in clause is moved from the end of ``calibration``, where it read as a detail."""
    found = _STAND_IN.search(calibration)
    head = f"engine {engine}"
    if found:
        head += f" ({found.group(1)} kernels stand in: {found.group(3)})"
        calibration = (calibration[: found.start()] + calibration[found.end() :]).strip("; ")
    return f"{head}; " + (f"profile '{profile}': {calibration}" if profile else calibration)


def decade_ticks() -> dict:
    """A log axis's ticks at the powers of ten, each in one unit style (``100 T``, ``1 P``):
    plotly's SI prefixes stop at T and wrote 10^15 beside 100T."""
    decades = [10.0**e for e in range(0, 22)]
    return dict(tickvals=decades, ticktext=[human_si(v).replace(".00", "") for v in decades])
