"""The app in a real browser: streamlit on localhost, headless Chromium, widgets, screenshots.

Needs Debian's chromium and chromium-driver (.ci/run installs them). Without them the test is
skipped on a developer machine and fails in CI (CI=true). Screenshots go to build/screenshots/.
"""

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

import mlacalc  # noqa: E402

pytestmark = pytest.mark.slow  # a browser session takes tens of seconds

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "build" / "screenshots"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server():
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(ROOT / "app.py"),
            "--server.headless",
            "true",
            "--server.address",
            "127.0.0.1",
            "--server.port",
            str(port),
            "--browser.gatherUsageStats",
            "false",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail(
            "streamlit did not start: " + proc.stdout.read().decode(errors="replace")[-2000:]
        )
    yield url
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture
def browser(tmp_path):
    if not (CHROMIUM and DRIVER):
        if os.environ.get("CI"):
            pytest.fail(
                "CI needs Debian's chromium and chromium-driver "
                "(apt-get install chromium chromium-driver)"
            )
        pytest.skip("chromium / chromedriver not installed")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--window-size=1600,1400",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(
        service=webdriver.ChromeService(executable_path=DRIVER), options=options
    )
    yield driver
    driver.quit()


def _wait_text(driver, text: str, timeout: float = 60) -> None:
    WebDriverWait(driver, timeout).until(lambda d: text in d.find_element(By.TAG_NAME, "body").text)


def test_app_in_chromium(server, browser):
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.get(server)
    default = f"{mlacalc.kv_cache_bytes('deepseek-v3', 131072, 8):,} bytes"
    _wait_text(browser, default)

    # the text can arrive before the widgets' lazily loaded components: wait for the input itself
    selector = 'input[aria-label="context length (tokens)"]'
    WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, selector))
    box = browser.find_element(By.CSS_SELECTOR, selector)
    browser.save_screenshot(str(SHOTS / "app-default.png"))
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("4096", Keys.ENTER)
    changed = f"{mlacalc.kv_cache_bytes('deepseek-v3', 4096, 8):,} bytes"
    _wait_text(browser, changed)
    assert "seq_len=4096" in browser.current_url
    time.sleep(1.0)  # let the charts finish drawing
    browser.save_screenshot(str(SHOTS / "app-seq-4096.png"))
    assert (SHOTS / "app-seq-4096.png").stat().st_size > 10_000


#: Tab title -> text that only that tab shows once it has rendered.
TABS = {
    "KV cache": "KV cache total",
    "Parameters": "Total parameters:",
    "FLOPs": "Formulas",
    "Roofline": "Ridge point of",
    "Capacity planner": "Deployment and request mix",
    "Measured sets": "Microbenchmark sets",
    "Convert to MLA": "post-training conversion",
    "Training": "model FLOPs per token",
}


def _no_exception(driver) -> None:
    boxes = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
    assert not boxes, [b.text[:300] for b in boxes]


def _open_tab(driver, title: str) -> None:
    next(
        t for t in driver.find_elements(By.CSS_SELECTOR, '[role="tab"]') if t.text.strip() == title
    ).click()


def _visit_every_tab(driver, prefix: str) -> None:
    for title, marker in TABS.items():
        _open_tab(driver, title)
        _wait_text(driver, marker)
        time.sleep(0.8)  # let the tab's charts draw
        _no_exception(driver)
        name = title.lower().replace(" ", "-")
        driver.save_screenshot(str(SHOTS / f"{prefix}-{name}.png"))
        assert (SHOTS / f"{prefix}-{name}.png").stat().st_size > 10_000


def _select(driver, label: str):
    return next(
        f
        for f in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stSelectbox"] input')
        if f.get_attribute("aria-label") == label
    )


def _pick(driver, label: str, option: str) -> None:
    field = _select(driver, label)
    field.click()
    field.send_keys(option)
    field.send_keys(Keys.ENTER)


def test_every_tab_with_a_bad_url_and_after_a_model_switch(server, browser):
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.get(f"{server}/?model=nonexistent&kv=fp99&hw=TPU&seq_len=99999999999&batch=-3")
    for notice in (
        "'model=nonexistent'",
        "'kv=fp99'",
        "'hw=TPU'",
        "'seq_len=99999999999'",
        "'batch=-3'",
    ):
        _wait_text(browser, notice)
    clamped = f"{mlacalc.kv_cache_bytes('deepseek-v3', 16 * 2**20, 1):,} bytes"
    _wait_text(browser, clamped)  # seq_len clamped to the widget's top, batch to its bottom
    _visit_every_tab(browser, "bad-url")

    _pick(browser, "Shipped model", "llama-3-70b")
    _open_tab(browser, "KV cache")  # only the open tab runs: the last visited was another
    _wait_text(browser, f"{mlacalc.kv_cache_bytes('llama-3-70b', 16 * 2**20, 1):,} bytes")
    assert "model=llama-3-70b" in browser.current_url and "&w=" not in browser.current_url
    assert _select(browser, "weight dtype").get_attribute("value") == "bf16"  # was fp8
    _visit_every_tab(browser, "llama")


#: The planner's answer: the metric labels that must be in the first screen.
ANSWER = ("TTFT", "TPOT", "output tokens/s per GPU", "output tokens/s per user")


def _rects(driver, labels) -> dict[str, dict]:
    """The bounding box of each metric whose label is one of ``labels`` (viewport pixels)."""
    return driver.execute_script(
        """
        const out = {};
        for (const m of document.querySelectorAll('[data-testid="stMetric"]')) {
            const label = m.querySelector('[data-testid="stMetricLabel"]');
            if (label && arguments[0].includes(label.innerText.trim())) {
                const r = m.getBoundingClientRect();
                out[label.innerText.trim()] = {top: r.top, bottom: r.bottom, left: r.left,
                                               right: r.right};
            }
        }
        return out;
        """,
        list(labels),
    )


def test_planner_answer_is_above_the_fold_at_1440x900(server, browser):
    """The planner at 1440 x 900: the fits line, TTFT, TPOT and tokens/s per GPU and per user
    are in the first screen, before any input; and the sidebar's widgets are drawn (not grey
    placeholders) once the page's text is (a first load runs the open tab only)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 1440, "height": 900, "deviceScaleFactor": 1, "mobile": False},
    )
    start = time.time()
    browser.get(f"{server}/?view=Capacity+planner")
    _wait_text(browser, "requests in flight: the most that meet")
    WebDriverWait(browser, 60).until(lambda d: len(_rects(d, ANSWER)) == len(ANSWER))
    WebDriverWait(browser, 60).until(
        lambda d: (
            not d.find_elements(
                By.CSS_SELECTOR, '[data-testid="stSidebar"] [data-testid="stSkeleton"]'
            )
        )
    )
    ready = time.time() - start
    time.sleep(1.5)  # let the charts below draw
    _no_exception(browser)
    browser.save_screenshot(str(SHOTS / "planner-1440x900.png"))
    height = browser.execute_script("return window.innerHeight")
    assert height == 900
    rects = _rects(browser, ANSWER)
    for label, r in rects.items():
        assert r["top"] >= 0 and r["bottom"] <= height, (label, r)
    answer = browser.find_element(By.CSS_SELECTOR, '[data-testid="stAlertContentSuccess"]')
    assert answer.rect["y"] + answer.rect["height"] <= height
    assert answer.text.startswith("Fits: DeepSeek-V3 on 8 x H200")
    gpus = browser.find_element(By.CSS_SELECTOR, 'input[aria-label="GPUs"]')
    assert gpus.rect["y"] > max(r["bottom"] for r in rects.values())  # the inputs come after
    # the first screen was ready (text and sidebar widgets) well before a whole page's run
    assert ready < 30, ready
