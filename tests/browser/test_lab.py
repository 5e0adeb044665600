"""Real-browser test: JupyterLab in headless Chromium runs every notebook ONCE; in that one pass its views are used
as a learner would, every registered control is timed (input event to last change, within 1 s), and the view is
photographed. The chapters are opened one after the other in the same JupyterLab tab, as a learner moves on
(File > Open from Path); a chapter whose test failed leaves the next one a freshly started JupyterLab.

The server is started the way `make lab` starts it: chapter 0 as the default URL, and the JupyterLab settings
`make lab` installs (tools/jupyterlab_overrides.json: widget state saved with the notebook, no news pop-up).
Each chapter's pass lives in tests/browser/interactions_chNN.py (see interactions.py: a module's PASSES, or its
INTERACTIONS followed by its TIMINGS). Chapter 0's pass is the newcomer's first ten minutes (land on chapter 0,
Run All, change a box) and the notebook reopened later in a new kernel (a quiz answer survives). Each test's
duration is printed at the end of the run (tests/browser/conftest.py). Screenshots: tests/artifacts/.
"""
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

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
OVERRIDES = ROOT / "tools" / "jupyterlab_overrides.json"
FIRST = "00_vocabulary.ipynb"
pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
LAB_LOG: Path | None = None          # the server's log, once the `lab` fixture has started it

playwright_sync = pytest.importorskip("playwright.sync_api")

from tests.browser.interactions import PASSES  # noqa: E402 (every chapter's pass, collected there)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on loopback over a copy of the notebooks (token off, windowing off), as `make lab` runs it."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: install Debian's chromium (tools/ensure_chromium.sh)")
    root = tmp_path_factory.mktemp("lab-root")
    for nb in (ROOT / "notebooks").glob("*.ipynb"):
        shutil.copy(nb, root / nb.name)
    settings = tmp_path_factory.mktemp("lab-settings")
    tracker = settings / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)
    (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    app_settings = tmp_path_factory.mktemp("lab-app-settings")          # what `make lab` installs in the venv
    (app_settings / "overrides.d").mkdir()
    shutil.copy(OVERRIDES, app_settings / "overrides.d" / "training-loop-course.json")
    port = _free_port()
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(settings),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path_factory.mktemp("lab-ws")),
               COURSE_PROGRESS=str(root / ".progress.json"))
    global LAB_LOG
    LAB_LOG = root.parent / "lab.log"
    log = open(LAB_LOG, "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         "--ServerApp.token=", "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True",
         f"--ServerApp.root_dir={root}", f"--LabApp.app_settings_dir={app_settings}",
         f"--LabApp.default_url=/lab/tree/{FIRST}"]
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


def wait_for_kernel(page, timeout_s: float = 60.0) -> None:
    """Wait for the notebook's kernel to be idle; should JupyterLab ask which kernel to start, pick the default.

    `make lab`'s settings start the course's one kernel without asking (autoStartDefaultKernel). A Launcher that
    JupyterLab opens on the emptied main area can arrive after the notebook and take the focus, and the status bar's
    kernel indicator follows the current tab: it is closed whenever it appears. A kernel dialog can follow the first
    idle status, so idle counts only when it still holds 300 ms later with no dialog open. On a timeout the message
    says what the page showed (its tabs, its status bar).
    """
    idle = page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")
    select = page.locator(".jp-Dialog button", has_text="Select")
    launcher = page.locator("#jp-main-dock-panel .lm-TabBar-tab", has_text="Launcher")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if select.count():
            select.first.click()
        elif launcher.count():
            launcher.first.locator(".lm-TabBar-tabCloseIcon").click()
        elif idle.count():
            page.wait_for_timeout(300)
            if idle.count() and not select.count() and not launcher.count():
                return
        page.wait_for_timeout(200)
    tabs = page.locator("#jp-main-dock-panel .lm-TabBar-tab").all_inner_texts()
    status = page.locator("#jp-main-statusbar").inner_text() if page.locator("#jp-main-statusbar").count() else "none"
    raise AssertionError(f"the kernel was not idle after {timeout_s:.0f} s: tabs {tabs}, status bar {status!r}")


def open_notebook(page, url: str, name: str) -> None:
    """Open a notebook and wait for its kernel. In a page already running this server's JupyterLab, the way a learner
    moves on to the next chapter: every tab closed (what the last chapter's run changed, discarded), then File > Open
    from Path. Otherwise JupyterLab starts on the notebook's URL, in a fresh workspace of its own (no tabs restored
    from earlier tests): about 5 s more here, most of it JupyterLab's own start in the browser."""
    if page.url.startswith(f"{url}/lab") and page.locator("#jp-main-dock-panel").count():
        close_every_tab(page)
        menu(page, "File", "Open from Path")
        page.locator(".jp-Dialog input").fill(name)
        page.keyboard.press("Enter")
        page.wait_for_function("(name) => document.title.startsWith(name.slice(0, 12))", arg=name, timeout=60_000)
    else:
        page.goto(f"{url}/lab/workspaces/nb{name.split('_')[0]}/tree/{name}?reset", wait_until="domcontentloaded")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    wait_for_kernel(page)
    assert page.url.split("?")[0].endswith(f"/tree/{name}"), page.url          # what notebook_kernel() reads


def close_every_tab(page) -> None:
    """File > Close All Tabs, answering Discard for each notebook a run left changed; wait until no notebook is left."""
    menu(page, "File", "Close All Tabs")
    for _ in range(100):
        discard = page.locator(".jp-Dialog button", has_text="Discard")
        if discard.count():
            discard.first.click()
        elif not page.locator(".jp-Notebook").count() and not page.locator(".jp-Dialog").count():
            return
        page.wait_for_timeout(100)
    raise AssertionError("the tabs did not close: " + page.locator("#jp-main-dock-panel").inner_text()[:500])


def notebook_kernel(page) -> str | None:
    """The id of the kernel the server holds for the page's notebook (its one session), or None."""
    base, _, rest = page.url.partition("/lab/")
    name = rest.split("tree/", 1)[-1].split("?")[0]          # lab/tree/NAME or lab/workspaces/W/tree/NAME
    sessions = json.load(urllib.request.urlopen(f"{base}/api/sessions", timeout=10))
    kernels = [s["kernel"]["id"] for s in sessions if s.get("path", "").endswith(name) and s.get("kernel")]
    return kernels[0] if len(kernels) == 1 else None


def settled_kernel(page, quiet_s: float = 1.0, timeout_s: float = 60.0) -> str | None:
    """Wait until the notebook's kernel has been the same one, and idle, for `quiet_s`: JupyterLab can replace the
    kernel it first started for a notebook within a second of opening it (seen in a CI run: started, shut down
    0.8 s later, another started), and cells sent to the first one are lost."""
    stable_since, last, end = time.monotonic(), None, time.monotonic() + timeout_s
    while time.monotonic() < end:
        kernel = notebook_kernel(page)
        if kernel != last:
            stable_since, last = time.monotonic(), kernel
        elif kernel and time.monotonic() - stable_since >= quiet_s and page.locator(
                ".jp-Notebook-ExecutionIndicator[data-status='idle']").count():
            return kernel
        time.sleep(0.25)
    return last


def run_all_cells(page, retry: bool = True) -> None:
    """Clear the committed outputs, Run All Cells from the menu, wait until every cell has run, fail on errors.

    A cell that raises stops Run All (the cells after it keep blank prompts), and so does a kernel that dies:
    either fails at once: with the traceback, or (nothing running for 10 s, some cells not run) with the first cell
    that did not run and the end of the server's log. Run All starts on a settled kernel; if the server's kernel
    for the notebook is another one when Run All stops (JupyterLab replaced it under the test, not a cell's doing),
    Run All runs once more, and says so.
    """
    kernel = settled_kernel(page)
    menu(page, "Edit", "Clear Outputs of All Cells")  # committed outputs must not count as this run's
    page.wait_for_function("() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]"
                           ".every(p => !/\\d/.test(p.textContent))", timeout=30_000)
    page.evaluate("() => { window.__stoppedSince = undefined; }")       # a retry starts its own 10 s
    menu(page, "Run", "Run All Cells")
    try:
        outcome = page.wait_for_function(
            """() => {
                const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(p => p.textContent.trim());
                if (prompts.length > 0 && prompts.every(t => /^\\[\\d+\\]:$/.test(t))) return 'done';
                const traceback = [...document.querySelectorAll(
                    ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")]
                    .some(o => o.textContent.includes('Traceback'));
                if (prompts.includes('[*]:')) { window.__stoppedSince = undefined; return false; }
                if (traceback) return 'error';
                window.__stoppedSince = window.__stoppedSince || Date.now();    // nothing running, some cells not
                return Date.now() - window.__stoppedSince > 10000 ? 'stopped' : false;   // run: a dead kernel
            }""", timeout=240_000, polling=500).json_value()
    except Exception:
        outcome = "timeout"
    if outcome == "done":
        assert_no_traceback(page)
        return
    replaced = notebook_kernel(page) != kernel
    if outcome in ("stopped", "error") and replaced and retry:  # (a cell the old kernel was running was interrupted)
        print(f"\n[browser] Run All stopped and the notebook's kernel is another one ({kernel} -> "
              f"{notebook_kernel(page)}): JupyterLab replaced it; Run All once more")
        return run_all_cells(page, retry=False)
    assert_no_traceback(page)                          # a cell raised: its traceback is the message
    cells = page.evaluate("""() => [...document.querySelectorAll('.jp-CodeCell')]
        .map((c, i) => [i, c.querySelector('.jp-InputPrompt').textContent.trim(),
                        (c.querySelector('.jp-InputArea-editor') || c).innerText.slice(0, 300)])""")
    running = [c for c in cells if c[1] == "[*]:"][:1]
    not_run = [c for c in cells if not any(ch.isdigit() for ch in c[1])][:1]
    raise AssertionError(f"Run All {'stopped' if outcome == 'stopped' else 'did not finish in 240 s'}; still running: "
                         f"{running}; the first cell not run: {not_run}; kernel replaced: {replaced}; the server's "
                         f"log ends: {lab_log_tail()}")


def lab_log_tail(lines: int = 15) -> str:
    """The server log's last lines about kernels or errors (a kernel that died and restarted says so there)."""
    if LAB_LOG is None:
        return "(no log)"
    said = [line for line in LAB_LOG.read_text(errors="replace").splitlines() if "ernel" in line or "rror" in line]
    return "\n".join(said[-lines:]) or "(nothing about kernels)"


def run_all(page, url: str, name: str) -> None:
    """Open a notebook, Run All Cells from the menu, wait until every cell has run, fail on error outputs."""
    open_notebook(page, url, name)
    run_all_cells(page)


def assert_no_traceback(page) -> None:
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


def shutdown_kernels(url: str) -> None:
    """Stop every kernel the test started, so the next notebook gets the machine's two cores."""
    for kernel in json.load(urllib.request.urlopen(f"{url}/api/kernels", timeout=10)):
        request = urllib.request.Request(f"{url}/api/kernels/{kernel['id']}", method="DELETE")
        urllib.request.urlopen(request, timeout=30)


@pytest.fixture(scope="module")
def pages(browser):
    """The page the chapters are opened in, one after the other, as a learner works through them in one JupyterLab
    tab. A test that fails closes it, so the next chapter starts JupyterLab afresh and does not inherit the damage."""
    held: dict = {}

    def page():
        if held.get("page") is None or held["page"].is_closed():
            held["page"] = browser.new_page(viewport={"width": 1280, "height": 900})
        return held["page"]
    yield page
    if held.get("page") is not None and not held["page"].is_closed():
        held["page"].close()


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb")))
def test_notebook_in_one_pass(lab, pages, name):
    """Run the notebook once; use, time and photograph its views in that same pass."""
    assert name in PASSES, f"{name} has no browser pass for its views"
    page = pages()
    console: list[str] = []

    def said(error) -> None:
        console.append(f"page error: {error}")
    page.on("pageerror", said)
    try:
        PASSES[name](page, lab)
        assert_no_traceback(page)
        assert "model not found" not in page.locator(".jp-Notebook").inner_text()
        assert shot(page, name.removesuffix(".ipynb")).stat().st_size > 10_000
        assert not console, console[:3]
    except Exception:
        shot(page, name.removesuffix(".ipynb") + "-FAILED")
        page.close()
        raise
    finally:
        if not page.is_closed():
            page.remove_listener("pageerror", said)
        shutdown_kernels(lab)
