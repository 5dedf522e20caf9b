"""Regenerate docs/img/report.png: the HTML report of the bundled example, as headless Chromium shows it.

Run with `make screenshot` (needs the chromium binary).
"""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from browser import Chromium, find_chromium  # noqa: E402

import advisor  # noqa: E402
from advisor.render import render_html  # noqa: E402

EXAMPLE = ROOT / "examples" / "ascend-level1-2ranks"
PAGE = ROOT / "out" / "report.html"
IMAGE = ROOT / "docs" / "img" / "report.png"
WIDTH, HEIGHT = 1100, 2300


def main() -> None:
    executable = find_chromium()
    if executable is None:
        sys.exit("chromium is not installed")
    PAGE.parent.mkdir(exist_ok=True)
    os.chdir(ROOT)  # the report shows the path as given: keep it short
    report = advisor.diagnose(EXAMPLE.relative_to(ROOT))
    PAGE.write_text(render_html(report), encoding="utf-8")
    with Chromium(executable) as browser:
        visit = browser.visit(PAGE.as_uri(), WIDTH, HEIGHT, {})
        if visit.errors:
            sys.exit(f"the page reported errors: {visit.errors}")
        clip = {"x": 0, "y": 0, "width": WIDTH, "height": HEIGHT, "scale": 1}
        data = browser.call("Page.captureScreenshot", format="png", clip=clip)["data"]
    IMAGE.write_bytes(base64.b64decode(data))
    print(f"wrote {IMAGE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
