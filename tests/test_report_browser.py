"""The report in a real browser: headless Chromium opens it, and we check that it made no network
request, logged no console error, threw nothing and opened no dialog (an injected alert() would).

Chromium is driven through the DevTools protocol over a pipe (--remote-debugging-pipe), so no Python
package is needed, only the `chromium` binary (Debian: apt-get install chromium). Without it the
tests skip. Screenshots go to test-artifacts/ (git-ignored) for a person to look at.
"""
from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from forensics import report
from test_report_cases import XSS_NAME, empty_case, leak_case, no_leak_case, opts

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """A headless Chromium and one page, spoken to over the DevTools pipe (fd 3 in, fd 4 out)."""

    def __init__(self, binary: str, width: int = 1280, height: int = 900):
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        self._profile = tempfile.mkdtemp(prefix="gf-chromium-")

        def fds():
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        args = [binary, "--headless", "--remote-debugging-pipe", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--mute-audio", "--hide-scrollbars",
                f"--user-data-dir={self._profile}", f"--window-size={width},{height}"]
        if os.geteuid() == 0:
            args.append("--no-sandbox")
        self.proc = subprocess.Popen(args, pass_fds=(3, 4), preexec_fn=fds, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)
        self.width = width
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=True)

    def _send(self, msg: dict) -> None:
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")

    def _read(self, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self._from_chrome], [], [], left)
            if ready:
                chunk = os.read(self._from_chrome, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the pipe")
                self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, params: dict | None = None, session: bool = False, timeout: float = 30) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        self._send(msg)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = self._read(deadline - time.monotonic())
            if m is None:
                break
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)
        raise TimeoutError(method)

    def wait_for(self, method: str, timeout: float = 30) -> dict:
        for m in self.events:
            if m.get("method") == method:
                return m
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = self._read(deadline - time.monotonic())
            if m is None:
                break
            self.events.append(m)
            if m.get("method") == method:
                return m
        raise TimeoutError(method)

    def open(self, url: str) -> None:
        self.call("Page.navigate", {"url": url}, session=True)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str):
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True)
        return r.get("result", {}).get("value")

    def screenshot(self, path: Path, max_height: int = 12000, slice_height: int | None = 1600) -> None:
        """The whole page as `path`, and as slices `path-1.png`, `path-2.png`... that read well on a screen."""
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session=True)
        metrics = self.call("Page.getLayoutMetrics", session=True)
        height = int(min(max_height, metrics.get("cssContentSize", metrics.get("contentSize"))["height"]))
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        shot = self.call("Page.captureScreenshot", {"format": "png"}, session=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        for n, top in enumerate(range(0, height, slice_height) if slice_height else [], start=1):
            clip = {"x": 0, "y": top, "width": self.width, "height": min(slice_height, height - top), "scale": 1}
            part = self.call("Page.captureScreenshot", {"format": "png", "clip": clip}, session=True)
            path.with_name(f"{path.stem}-{n}.png").write_bytes(base64.b64decode(part["data"]))

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)
        shutil.rmtree(self._profile, ignore_errors=True)

    def problems(self, page_url: str) -> list[str]:
        out = []
        for m in self.events:
            method, p = m.get("method"), m.get("params", {})
            if method == "Network.requestWillBeSent" and p["request"]["url"] != page_url:
                out.append(f"network request: {p['request']['url'][:200]}")
            elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                out.append(f"console {p['type']}: {json.dumps(p.get('args'))[:300]}")
            elif method == "Runtime.exceptionThrown":
                out.append(f"exception: {json.dumps(p.get('exceptionDetails'))[:300]}")
            elif method == "Log.entryAdded" and p["entry"].get("level") in ("error", "warning"):
                out.append(f"log {p['entry']['level']}: {p['entry'].get('text', '')[:300]}")
            elif method == "Page.javascriptDialogOpening":
                out.append(f"dialog opened: {p.get('message')!r}")
        return out


@pytest.fixture(scope="module")
def browser():
    binary = chromium_binary()
    if binary is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    b = Browser(binary)
    yield b
    b.close()


CASES = {"leak": leak_case, "no_leak": no_leak_case, "empty": empty_case}


@pytest.mark.parametrize("name", sorted(CASES))
def test_report_opens_offline_without_errors(browser, name, tmp_path):
    bundle, analysis = CASES[name]()
    html = report.render_html(report.build_context(bundle, analysis, opts()))
    page = tmp_path / f"report-{name}.html"
    page.write_text(html, encoding="utf-8")
    url = page.as_uri()
    browser.events.clear()
    browser.open(url)
    # move the mouse across the first chart: the hover read-out must work and not throw
    box = browser.evaluate(
        "(() => { const s = document.querySelector('svg.chart'); if (!s) return null;"
        " const r = s.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()")
    if box:
        left, top, width, height = box
        for frac in (0.2, 0.5, 0.8):
            browser.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": left + width * frac,
                                                      "y": top + height * 0.5}, session=True)
        readout = browser.evaluate("document.querySelector('output.readout').textContent")
        assert readout and ("GiB" in readout or "MiB" in readout), readout
    screenshot = ARTIFACTS / f"report-{name}.png"
    browser.screenshot(screenshot)
    assert screenshot.stat().st_size > 10_000
    # printable: the print style sheet applies cleanly and a PDF comes out
    browser.call("Emulation.setEmulatedMedia", {"media": "print"}, session=True)
    try:
        browser.screenshot(ARTIFACTS / f"report-{name}-print.png")
        pdf = browser.call("Page.printToPDF", {"printBackground": False}, session=True, timeout=60)
        assert base64.b64decode(pdf["data"])[:5] == b"%PDF-"
    finally:
        browser.call("Emulation.setEmulatedMedia", {"media": ""}, session=True)
    assert browser.problems(url) == []
    # the hostile process name is shown as text, and no element came out of it
    if name == "leak":
        assert XSS_NAME in browser.evaluate("document.body.innerText")
        assert browser.evaluate("document.querySelectorAll('img, iframe, object, embed, link').length") == 0
        assert browser.evaluate("document.querySelectorAll('script').length") == 2


def test_report_is_readable_without_javascript(browser, tmp_path):
    bundle, analysis = leak_case()
    page = tmp_path / "report.html"
    page.write_text(report.render_html(report.build_context(bundle, analysis, opts())), encoding="utf-8")
    browser.call("Emulation.setScriptExecutionDisabled", {"value": True}, session=True)
    try:
        browser.events.clear()
        browser.open(page.as_uri())
        root = browser.call("DOM.getDocument", {"depth": 0}, session=True)["root"]["nodeId"]
        dom = browser.call("DOM.getOuterHTML", {"nodeId": root}, session=True)["outerHTML"]
        browser.screenshot(ARTIFACTS / "report-leak-nojs.png")
    finally:
        browser.call("Emulation.setScriptExecutionDisabled", {"value": False}, session=True)
    assert "Memory leak" in dom and "Timeline" in dom and "logs/kern.log:120" in dom
    assert dom.count("<svg") >= 4 and dom.count('class="series') >= 4
    assert browser.problems(page.as_uri()) == []


SAMPLES = Path(__file__).resolve().parent.parent / "sample_logs"
INCIDENTS = sorted(p for p in SAMPLES.glob("*/") if p.is_dir() and any(p.iterdir()))


@pytest.mark.skipif(not INCIDENTS, reason="no recorded incidents under sample_logs/ yet")
@pytest.mark.parametrize("folder", INCIDENTS, ids=[p.name for p in INCIDENTS])
def test_sample_incident_report_in_browser(browser, folder, tmp_path):
    """Each recorded incident: the full pipeline, the report, a browser with the network watched, a screenshot."""
    from forensics import pipeline
    from forensics.options import Options

    opts_ = Options(tz="UTC")
    bundle, analysis = pipeline.run([str(folder)], opts_)
    ctx = report.build_context(bundle, analysis, opts_)
    html = report.render_html(ctx)
    assert len(html.encode()) < 500_000
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    browser.events.clear()
    browser.open(page.as_uri())
    # slices for reading on a screen only when asked (GPU_FORENSICS_SCREENSHOT_SLICES=1): they cost time
    browser.screenshot(ARTIFACTS / f"sample-{folder.name}.png",
                       slice_height=1600 if os.environ.get("GPU_FORENSICS_SCREENSHOT_SLICES") == "1" else None)
    assert browser.problems(page.as_uri()) == []
    assert not ctx["empty"], ctx["empty_reasons"]
    report.render_markdown(ctx)
