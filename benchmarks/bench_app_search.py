"""The app's deployment search against the command line's (a benchmark, not a timed test).

The same search (DeepSeek-V3 on H200 at 4, 8 and 16 GPUs, 2,000 in / 500 out, TTFT 2 s, TPOT
50 ms) three ways, each the median of ``runs``:

(a) CLI: ``mlacalc search ... --ttft 2s --tpot 50ms`` in a fresh process (start-up, imports,
    the search and printing its tables), wall seconds;
(b) app: the planner re-run that turns the search on (Streamlit's AppTest: the script, the
    search with its cache cleared, the chart of every point, the reasons), wall seconds;
(c) app in a browser (``--browser``, needs chromium and chromedriver): from ticking "search
    deployments" to the chosen point's sentence on the page, chart drawn, wall seconds.

Target: the app within 1.5x of the CLI on the same machine. The ratio printed is (b) / (a)
and, with ``--browser``, (c) / (a).

    python benchmarks/bench_app_search.py [runs] [--browser]
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
MODEL, HARDWARE, GPUS, ISL, OSL = "deepseek-v3", "H200", "4,8,16", 2000, 500
CLI = [
    sys.executable,
    "-m",
    "mlacalc",
    "search",
    MODEL,
    "-H",
    HARDWARE,
    "--gpus",
    GPUS,
    "--isl",
    str(ISL),
    "--osl",
    str(OSL),
    "--ttft",
    "2s",
    "--tpot",
    "50ms",
]


def cli_seconds() -> float:
    start = time.perf_counter()
    subprocess.run(CLI, check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - start


def app_seconds() -> float:
    """One fresh AppTest on the planner; the timed re-run is the one that ticks the search (its
    cache cleared first, so the search runs)."""
    import logging

    logging.disable(logging.WARNING)
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params["view"] = "Capacity planner"
    at.run()
    st.cache_data.clear()  # every cached call, the search's included
    at.run()  # the planner's own figures again, so the timed run adds only the search
    at.checkbox(key="plan_search").check()
    start = time.perf_counter()
    at.run()
    elapsed = time.perf_counter() - start
    assert not at.exception and any(m.value.startswith("**Chosen:") for m in at.markdown)
    return elapsed


def browser_seconds() -> float:
    """Streamlit on localhost and headless Chromium: tick the search, wait for the chosen
    point's sentence and the frontier chart."""
    import socket
    import urllib.request

    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "streamlit", "run", APP, "--server.headless", "true"),
            *("--server.port", str(port), "--browser.gatherUsageStats", "false"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser")
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    driver = None
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{url}/_stcore/health", timeout=2)
                break
            except OSError:
                time.sleep(0.3)
        driver = webdriver.Chrome(
            service=webdriver.ChromeService(executable_path=shutil.which("chromedriver")),
            options=options,
        )
        driver.get(f"{url}/?view=Capacity+planner")
        body = lambda d: d.find_element(By.TAG_NAME, "body").text  # noqa: E731
        WebDriverWait(driver, 120).until(lambda d: "requests in flight" in body(d))
        time.sleep(2.0)  # the first screen settles
        box = next(
            b
            for b in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stCheckbox"]')
            if "search deployments" in b.text
        )
        start = time.perf_counter()
        box.find_element(By.TAG_NAME, "label").click()
        WebDriverWait(driver, 300).until(
            lambda d: (
                "Chosen:" in body(d)
                and d.find_elements(By.CSS_SELECTOR, ".js-plotly-plot .scatterlayer")
            )
        )
        return time.perf_counter() - start
    finally:
        if driver is not None:
            driver.quit()
        server.terminate()


def main(runs: int, browser: bool) -> None:
    """Rounds of (a), (b) and (c) interleaved, so that a load on the machine that comes and
    goes weighs on each alike; the medians and the median of each round's ratio."""
    cli, app, page = [], [], []
    for _ in range(runs):
        cli.append(cli_seconds())
        app.append(app_seconds())
        if browser:
            page.append(browser_seconds())
    med = statistics.median
    print(f"(a) CLI search, fresh process: median {med(cli):.2f} s over {runs}")
    print(f"(b) app re-run with the search (AppTest): median {med(app):.2f} s over {runs}")
    print(f"    ratio app / CLI, median of rounds: {med(b / a for a, b in zip(cli, app)):.2f}")
    if browser:
        print(f"(c) app in Chromium, tick to chosen point: median {med(page):.2f} s over {runs}")
        ratio = med(c / a for a, c in zip(cli, page))
        print(f"    ratio browser / CLI, median of rounds: {ratio:.2f} (target <= 1.5)")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(int(args[0]) if args else 3, "--browser" in sys.argv)
