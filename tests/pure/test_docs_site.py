"""The documentation site builds with ``mkdocs build --strict``, offline, and opens in headless
Chromium without console errors or failed requests, showing the generated reference tables.

The browser test keeps its screenshot of the ``ingest_cdc`` reference page in its temporary
directory; ``SPARKEXT_DOCS_SCREENSHOT=1`` also writes it over the committed one,
``docs/assets/ingest_cdc-reference.png``:

    SPARKEXT_DOCS_SCREENSHOT=1 .venv/bin/python -m pytest tests/pure/test_docs_site.py
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = ROOT / "docs" / "assets" / "ingest_cdc-reference.png"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
# What would reach the network from a page: stylesheets, scripts, fonts, images by URL.
_EXTERNAL = re.compile(r"""<(?:link|script|img)\b[^>]*\b(?:href|src)=["']?(?:https?:)?//""")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built as a user builds it, with no network (proxies pointed nowhere)."""
    out = tmp_path_factory.mktemp("site")
    env = {
        **os.environ,
        "NO_MKDOCS_2_WARNING": "1",
        "http_proxy": "http://127.0.0.1:9",
        "https_proxy": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
    }
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-4000:]
    assert "WARNING" not in built.stderr, built.stderr[-4000:]
    return out


def test_the_site_builds_strictly_with_every_page(site):
    assert (site / "index.html").is_file()
    assert (site / "reference" / "ingest_cdc.html").is_file()
    assert (site / "reference" / "python.html").is_file()
    assert (site / "search" / "search_index.json").is_file()


def test_the_site_loads_nothing_from_the_network(site):
    for page in site.rglob("*.html"):
        found = _EXTERNAL.search(page.read_text(encoding="utf-8"))
        assert found is None, f"{page.relative_to(site)} loads {found.group(0)!r}"


def test_the_python_api_page_documents_the_functions(site):
    text = (site / "reference" / "python.html").read_text(encoding="utf-8")
    for name in ("sparkext.sql", "sparkext.session", "sparkext.changelog_stream"):
        assert f'id="{name}"' in text, name


@pytest.fixture
def served(site):
    handler = functools.partial(_Quiet, directory=str(site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # the base class's names
        pass


def test_the_site_opens_in_chromium(served, tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.skip("Chromium is not installed (.ci/setup installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    failed: list[str] = []
    outside: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1100})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("requestfailed", lambda r: failed.append(f"{r.url}: {r.failure}"))

            def offline(route):
                if urlparse(route.request.url).hostname == "127.0.0.1":
                    route.continue_()
                else:
                    outside.append(route.request.url)
                    route.abort()

            page.route("**/*", offline)
            page.goto(f"{served}/index.html", wait_until="networkidle")
            assert "sparkext" in page.title()
            page.goto(f"{served}/reference/ingest_cdc.html", wait_until="networkidle")
            table = page.locator("article table").first
            header = table.locator("thead").inner_text()
            assert "required / default" in header, header
            names = table.locator("tbody tr td:first-child").all_inner_texts()
            assert names[:4] == ["table", "source", "checkpoint", "primary_key"], names
            assert page.get_by_role("heading", name="Output columns").is_visible()
            shot = tmp_path / "ingest_cdc-reference.png"
            page.screenshot(path=str(shot))
        finally:
            browser.close()
    assert errors == [], errors
    assert failed == [], failed
    assert outside == [], outside
    if os.environ.get("SPARKEXT_DOCS_SCREENSHOT"):
        shutil.copyfile(shot, SCREENSHOT)
