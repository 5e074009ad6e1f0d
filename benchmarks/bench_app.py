"""Speed of the Streamlit app (a benchmark, not a timed test).

(a) first render: a fresh process runs app.py once (Streamlit's AppTest) on the default
    scenario (DeepSeek-V3, 128K x 8, H200); median of 5 processes;
(b) a widget change: the context length is changed and the script re-runs; median of 15.
Targets on the 2-core development machines: (a) <= 3 s, (b) <= 300 ms.

    python benchmarks/bench_app.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

APP = str(Path(__file__).resolve().parent.parent / "app.py")

FIRST = f"""
import time, logging
logging.disable(logging.WARNING)
from streamlit.testing.v1 import AppTest
t = time.perf_counter()
at = AppTest.from_file({APP!r}, default_timeout=120).run()
assert not at.exception
print(time.perf_counter() - t)
"""


def first_render(runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", FIRST], capture_output=True, text=True, check=True
        ).stdout
        times.append(float(out.strip().splitlines()[-1]))
    return statistics.median(times)


def rerun(runs: int = 15) -> float:
    import logging

    logging.disable(logging.WARNING)
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=120).run()
    times = []
    for i in range(runs):
        at.number_input(key="seq_len").set_value(4096 + 1024 * i)
        t = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t)
        assert not at.exception
    return statistics.median(times)


if __name__ == "__main__":
    print(f"(a) first render: median {first_render():.2f} s over 5 fresh processes")
    print(f"(b) widget change re-run: median {rerun() * 1e3:.0f} ms over 15 changes")
