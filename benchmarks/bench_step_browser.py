"""Chapter 6's Step in JupyterLab, click to last change, beside a bare button, with where the time goes.

A one-cell notebook shows the simulator; Reset, then Step and a bare ipywidgets button clicked in turn (the same
load for both), ROUNDS x STEPS times. The kernel stamps when the click arrives and when the plot's message leaves,
so each Step splits into click -> kernel, kernel work, and message -> last change on the page (the browser's
drawing is the live plot's own data-draw-ms). Needs Chromium and Playwright, like tests/browser.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_step_browser.py      # ROUNDS=3 STEPS=12 by default
"""
import json, os, shutil, socket, statistics, subprocess, sys, tempfile, time, urllib.request
from pathlib import Path
import nbformat
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from playwright.sync_api import sync_playwright
from tests.browser.test_lab import CHROMIUM, OVERRIDES, open_notebook
from tests.browser.interactions_ch06 import observe, timed_click, add_bare_button, add_cell

ROUNDS, STEPS = int(os.environ.get("ROUNDS", 3)), int(os.environ.get("STEPS", 12))
SETUP = r'''
import time, json
from course_utils import setup_notebook
setup_notebook()
from course_utils.widgets.simulator import simulator
sim = simulator()
KT = []
def _stamp(*_):
    KT.append({"recv": time.time() * 1000})
sim.buttons["step"]._click_handlers.callbacks.insert(0, _stamp)
_send = sim.plot.send
def _timed_send(content, buffers=None):
    KT[-1:] and KT[-1].setdefault("send0", time.time() * 1000)
    _send(content, buffers)
    KT[-1:] and KT[-1].update(send1=time.time() * 1000, nbytes=len(json.dumps(content)) + sum(len(b) for b in buffers or []))
sim.plot.send = _timed_send
sim
'''
tmp = Path(tempfile.mkdtemp(prefix="stepm-"))
nb = nbformat.v4.new_notebook()
nb.cells = [nbformat.v4.new_code_cell(SETUP)]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbformat.write(nb, tmp / "66_sim.ipynb")
settings = tmp / "settings" / "@jupyterlab" / "notebook-extension"; settings.mkdir(parents=True)
(settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
app = tmp / "app" / "overrides.d"; app.mkdir(parents=True); shutil.copy(OVERRIDES, app / "x.json")
with socket.socket() as s:
    s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", JUPYTERLAB_SETTINGS_DIR=str(tmp / "settings"), JUPYTERLAB_WORKSPACES_DIR=str(tmp / "ws"))
server = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
    "--ServerApp.token=", "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True", f"--ServerApp.root_dir={tmp}",
    f"--LabApp.app_settings_dir={tmp / 'app'}", "--allow-root"], env=env, stdout=open(tmp / "lab.log", "w"),
    stderr=subprocess.STDOUT)
url = f"http://127.0.0.1:{port}"
try:
    for _ in range(120):
        try:
            urllib.request.urlopen(f"{url}/api/status", timeout=1); break
        except Exception:
            time.sleep(0.5)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        page = b.new_page(viewport={"width": 1280, "height": 900})
        open_notebook(page, url, "66_sim.ipynb")
        page.wait_for_timeout(3000)
        page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-InputPrompt").first.click()
        page.keyboard.press("Shift+Enter")
        page.wait_for_timeout(3000)
        if "[ ]" in page.locator(".jp-InputPrompt").first.inner_text():
            page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-InputPrompt").first.click()
            page.keyboard.press("Control+Enter")
        page.wait_for_function("() => document.querySelector('.lp-root') && document.querySelector('.lp-root').dataset.version", timeout=180_000)
        add_bare_button(page)
        page.locator(".lp-root").first.scroll_into_view_if_needed()
        steps, bare, draws, clicks = [], [], [], []
        bare_clicks = 0
        for r in range(ROUNDS):
            observe(page, ".lp-root")
            timed_click(page, "Reset")
            for n in range(STEPS):
                observe(page, ".lp-root")
                steps.append(timed_click(page, "Step", until=f"step {n + 1} of 190"))
                clicks.append(page.evaluate("() => [performance.timeOrigin + window.__simT0, performance.timeOrigin + window.__simLast]"))
                draws.append(float(page.evaluate("() => document.querySelector('.lp-root').dataset.drawMs")))
                observe(page, "button.jupyter-button:has-text('Bare')")
                bare_clicks += 1
                bare.append(timed_click(page, "Bare", until=f"bare clicks: {bare_clicks}"))
        add_cell(page, "import json as _j; print('KTJSON' + _j.dumps(KT) + 'END')", "END")
        txt = page.locator(".jp-Notebook").inner_text()
        kt = json.loads(txt.split("KTJSON")[-1].split("END")[0])
        kt = kt[-len(clicks):]
        up = [k["recv"] - c[0] for k, c in zip(kt, clicks)]
        kern = [k["send0"] - k["recv"] for k in kt]
        sendc = [k["send1"] - k["send0"] for k in kt]
        down = [c[1] - k["send1"] for k, c in zip(kt, clicks)]
        med = statistics.median
        out = {"step_ms": steps, "bare_ms": bare, "draw_ms": draws, "step_median": med(steps), "step_min": min(steps),
               "bare_median": med(bare), "bare_min": min(bare), "draw_median": med(draws),
               "click_to_kernel_median": med(up), "kernel_compute_median": med(kern), "send_call_median": med(sendc),
               "send_to_last_change_median": med(down), "msg_bytes": kt[-1]["nbytes"], "load": os.getloadavg()}
        print(json.dumps({k: v for k, v in out.items() if not isinstance(v, list)}, indent=1))
        print("steps", [round(x) for x in steps]); print("bare ", [round(x) for x in bare])
        Path(os.environ.get("OUTJSON", ROOT / "tests" / "artifacts" / "ch06_step_browser.json")).write_text(json.dumps(out, indent=1))
        b.close()
finally:
    server.terminate(); server.wait(20)
    shutil.rmtree(tmp, ignore_errors=True)
