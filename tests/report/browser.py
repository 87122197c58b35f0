"""Load a report in headless Chromium (the system's package, no driver library) and read back what it rendered.

A small script is put at the top of a copy of the page: it records every console error, uncaught error and
rejected promise, waits for the page's figures (``window.placerReady``), then counts each figure's marks (SVG
bars and markers, heatmap images, WebGL points) and the non-background pixels of its rendered image, and writes all
of it as JSON into the DOM, which ``--dump-dom`` prints.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

HOOK = r"""
<script>
window.__placer = {errors: []};
(function () {
  const log = m => window.__placer.errors.push(String(m));
  const orig = console.error.bind(console);
  console.error = (...a) => { log(a.join(' ')); orig(...a); };
  window.addEventListener('error', e => log('error: ' + (e.message || e.type)));
  window.addEventListener('unhandledrejection', e => log('rejection: ' + (e.reason && e.reason.message || e.reason)));
  function pixels(el) {
    return Plotly.toImage(el, {format: 'png', width: 900, height: 500}).then(url => new Promise(resolve => {
      const img = new Image();
      img.onload = () => {
        const c = document.createElement('canvas'); c.width = img.width; c.height = img.height;
        const g = c.getContext('2d'); g.drawImage(img, 0, 0);
        const d = g.getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i] < 235 || d[i + 1] < 235 || d[i + 2] < 235) n++;
        resolve(n);
      };
      img.onerror = () => resolve(-1);
      img.src = url;
    }));
  }
  function report() {
    const figs = Array.from(document.querySelectorAll('.placer-figure'));
    return Promise.all(figs.map(el => pixels(el).then(px => ({
      id: el.id,
      expect: JSON.parse(el.dataset.marks),
      points: el.querySelectorAll('.point').length,
      images: el.querySelectorAll('.hm image').length,
      segments: (el._fullData || []).filter(t => t.type === 'scattergl').reduce((s, t) => s + (t._length || 0), 0),
      canvases: el.querySelectorAll('canvas').length,
      pixels: px,
    })))).then(figures => {
      const out = document.createElement('pre');
      out.id = 'placer-selftest';
      out.textContent = JSON.stringify({errors: window.__placer.errors, figures: figures});
      document.body.appendChild(out);
    });
  }
  window.addEventListener('load', () => {
    const wait = () => window.placerReady ? window.placerReady.then(report, e => { log('ready: ' + e); report(); })
                                          : setTimeout(wait, 50);
    wait();
  });
})();
</script>
"""

FLAGS = ["--headless", "--no-sandbox", "--disable-dev-shm-usage", "--enable-unsafe-swiftshader",
         "--use-angle=swiftshader", "--window-size=1400,1000", "--hide-scrollbars", "--mute-audio",
         "--no-first-run", "--disable-extensions"]


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def selftest(page: Path, work: Path, budget_ms: int = 60_000) -> dict[str, Any]:
    exe = chromium()
    assert exe is not None
    text = page.read_text()
    hooked = work / f"hooked-{page.name}"
    hooked.write_text(text.replace("<head>", "<head>" + HOOK, 1))
    res = subprocess.run([exe, *FLAGS, f"--user-data-dir={work / 'profile'}", f"--virtual-time-budget={budget_ms}",
                          "--dump-dom", hooked.as_uri()], capture_output=True, text=True, timeout=300, check=False)
    found = re.search(r'<pre id="placer-selftest">(.*?)</pre>', res.stdout, re.S)
    assert found is not None, f"no self-test output; chromium said: {res.stderr[-2000:]}"
    raw = found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    result: dict[str, Any] = json.loads(raw)
    return result


def screenshot(page: Path, section: str, out: Path, work: Path, size: str = "1400,900") -> None:
    exe = chromium()
    assert exe is not None
    flags = [f if not f.startswith("--window-size") else f"--window-size={size}" for f in FLAGS]
    subprocess.run([exe, *flags, f"--user-data-dir={work / 'profile'}", "--virtual-time-budget=30000",
                    f"--screenshot={out}", f"{page.as_uri()}#only={section}"], capture_output=True, timeout=300,
                   check=True)
