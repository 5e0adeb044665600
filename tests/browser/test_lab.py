"""Real-browser test: JupyterLab in headless Chromium opens each notebook, runs all cells, uses its main widget."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.browser.interactions import INTERACTIONS  # every chapter's, collected there

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

playwright_sync = pytest.importorskip("playwright.sync_api")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on loopback over a copy of the notebooks (token off, windowing off)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: install Debian's chromium (tools/ensure_chromium.sh)")
    root = tmp_path_factory.mktemp("lab-root")
    for nb in (ROOT / "notebooks").glob("*.ipynb"):
        shutil.copy(nb, root / nb.name)
    settings = tmp_path_factory.mktemp("lab-settings")
    tracker = settings / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)
    (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    port = _free_port()
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(settings),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path_factory.mktemp("lab-ws")),
               COURSE_PROGRESS=str(root / ".progress.json"))
    log = open(root.parent / "lab.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         "--ServerApp.token=", "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True",
         f"--ServerApp.root_dir={root}", "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
        + (["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),
        env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urllib.request.urlopen(f"{url}/api/status", timeout=1)
            break
        except Exception:
            time.sleep(0.5)
    else:
        server.terminate()
        pytest.fail("JupyterLab did not start: " + (root.parent / "lab.log").read_text()[-2000:])
    yield url
    server.terminate()
    server.wait(20)


@pytest.fixture(scope="module")
def browser():
    with playwright_sync.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        yield chromium
        chromium.close()


def run_all(page, url: str, name: str) -> None:
    """Open a notebook, Run All Cells from the menu, wait until every cell has run, fail on error outputs."""
    workspace = name.split("_")[0]  # a fresh workspace per notebook: no tabs restored from earlier tests
    page.goto(f"{url}/lab/workspaces/nb{workspace}/tree/{name}?reset", wait_until="domcontentloaded")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    dialog = page.locator(".jp-Dialog button", has_text="Select")
    try:  # JupyterLab may ask which kernel to start
        dialog.first.click(timeout=15_000)
    except playwright_sync.TimeoutError:
        pass
    news = page.locator(".jp-toast-button", has_text="No")
    if news.count():
        news.first.click()
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)
    menu(page, "Edit", "Clear Outputs of All Cells")  # committed outputs must not count as this run's
    page.wait_for_function("() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]"
                           ".every(p => !/\\d/.test(p.textContent))", timeout=30_000)
    menu(page, "Run", "Run All Cells")
    page.wait_for_function(
        """() => {
            const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(p => p.textContent.trim());
            return prompts.length > 0 && prompts.every(t => /^\\[\\d+\\]:$/.test(t));
        }""", timeout=240_000)
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']", has_text="Traceback")
    assert errors.count() == 0, errors.first.inner_text()[:2000]


def menu(page, top: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=top).first.click()
    page.locator(".lm-Menu-itemLabel", has_text=item).first.click()


def shot(page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb")))
def test_notebook_runs_and_its_widget_responds(lab, browser, name):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        run_all(page, lab, name)
        interact = INTERACTIONS.get(name)
        assert interact is not None, f"{name} has no browser interaction for its main widget"
        try:
            interact(page)
        except Exception:
            shot(page, name.removesuffix(".ipynb") + "-FAILED")
            raise
        assert shot(page, name.removesuffix(".ipynb")).stat().st_size > 10_000
    finally:
        page.close()
        shutdown_kernels(lab)


def shutdown_kernels(url: str) -> None:
    """Stop every kernel the test started, so the next notebook gets the machine's two cores."""
    for kernel in json.load(urllib.request.urlopen(f"{url}/api/kernels", timeout=10)):
        request = urllib.request.Request(f"{url}/api/kernels/{kernel['id']}", method="DELETE")
        urllib.request.urlopen(request, timeout=30)
