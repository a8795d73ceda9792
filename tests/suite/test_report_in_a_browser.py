"""index.html opened in a real headless browser: it loads, its images load, its links to failures resolve."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image

from tests.suite.test_readme import FAILING

BROWSER = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                if shutil.which(name)), None)

# A page that opens the report in a frame and writes what it finds into its own DOM, which the
# browser's --dump-dom prints once everything (the frame and its images) has loaded.
PROBE = """<!doctype html><html><body><pre id="found"></pre>
<iframe src="index.html" onload="
  const page = this.contentDocument;
  const images = [...page.images].map(i => ({src: i.getAttribute('src'), loaded: i.complete && i.naturalWidth > 0}));
  const links = [...page.querySelectorAll('a[href^=&quot;#&quot;]')]
    .map(a => ({href: a.getAttribute('href'), resolves: !!page.getElementById(a.getAttribute('href').slice(1))}));
  document.getElementById('found').textContent = JSON.stringify({title: page.title, images, links});
"></iframe></body></html>"""


@pytest.mark.skipif(BROWSER is None, reason="no Chromium on this machine (Debian: apt-get install chromium)")
def test_the_html_report_of_a_failing_run_loads_in_a_browser(readme_command, tmp_path):
    """The report of the README's failing run (reports/mine), copied beside the probe page."""
    failed = readme_command(FAILING)
    assert failed["returncode"] == pytest.ExitCode.TESTS_FAILED, failed["stdout"][-3000:]
    shutil.copytree(Path(failed["root"]) / "reports" / "mine", tmp_path, dirs_exist_ok=True)
    (tmp_path / "probe.html").write_text(PROBE)
    opened = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
                             "--enable-logging=stderr", "--v=0", "--dump-dom", (tmp_path / "probe.html").as_uri()],
                            capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="found">(.*?)</pre>', opened.stdout, re.S)
    assert found and found.group(1), opened.stdout[-2000:] + opened.stderr[-2000:]
    page = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert page["title"] == "Softmax accuracy report"
    assert len(page["images"]) == 3 and all(image["loaded"] for image in page["images"]), page["images"]
    assert page["links"] and all(link["resolves"] for link in page["links"]), page["links"]
    assert "Uncaught" not in opened.stderr and "CONSOLE" not in opened.stderr, opened.stderr[-2000:]


@pytest.mark.skipif(BROWSER is None, reason="no Chromium on this machine (Debian: apt-get install chromium)")
def test_the_failing_runs_report_shows_its_failures_highlighted_on_screen(readme_command, tmp_path):
    """A screenshot of the page as Chromium renders it: the failing verdict and the failing rows in their red."""
    failed = readme_command(FAILING)
    assert failed["returncode"] == pytest.ExitCode.TESTS_FAILED, failed["stdout"][-3000:]
    shot = tmp_path / "index.png"
    subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,2400",
                    f"--screenshot={shot}", (Path(failed["root"]) / "reports" / "mine" / "index.html").as_uri()],
                   capture_output=True, text=True, timeout=120)
    pixels = image.imread(shot)[..., :3]
    red = np.all(np.abs(pixels - np.array([0xff, 0xdd, 0xdd]) / 255) < 0.02, axis=-1)  # the .bad rows' #fdd
    assert red[:600].any(), "the failing verdict at the top of the page is not highlighted"
    assert red.sum(axis=1).astype(bool).sum() > 100, "fewer highlighted lines than a verdict and some failing rows"

