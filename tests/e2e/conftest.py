"""Browser fixtures: Playwright driving Debian's chromium (/usr/bin/chromium) against live_server."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.e2e.steps import close_quietly

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
ASYNC_UNSAFE = "DJANGO_ALLOW_ASYNC_UNSAFE"


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if "tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="module")
def browser() -> Iterator:
    if not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM):
        if os.environ.get("REQUIRE_SERVICES") == "1":
            pytest.fail(f"Debian chromium is required for browser tests but {CHROMIUM} is missing")
        pytest.skip(f"Debian chromium not installed at {CHROMIUM} (make test installs it with apt-get)")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the tests' own ORM calls stay synchronous.
    # Only while browsers run: a process-wide flag would leak into subprocesses (check --deploy rejects it).
    previous = os.environ.get(ASYNC_UNSAFE)
    os.environ[ASYNC_UNSAFE] = "true"
    try:
        yield from _launch(sync_playwright)
    finally:
        if previous is None:
            os.environ.pop(ASYNC_UNSAFE, None)
        else:
            os.environ[ASYNC_UNSAFE] = previous


def _launch(sync_playwright) -> Iterator:
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage"],
        )
        yield browser
        browser.close()


@pytest.fixture
def live_url(live_server) -> str:
    return live_server.url


@pytest.fixture
def page(browser, live_server) -> Iterator:
    context = browser.new_context(base_url=live_server.url, accept_downloads=True)
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    close_quietly(context)

