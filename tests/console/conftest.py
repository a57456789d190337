"""The console's fixtures: one broker per module serving the console beside it (`--set console.port`, with its
Prometheus metrics on), one headless Chromium per module (Debian's, driven by Playwright), and a page per test
that fails the test on any browser console error or uncaught script error. Screenshots go to
tests/console/artifacts/ (gitignored)."""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path

import pytest

from odradek.embedded import BrokerProcess
from tests.security.conftest import free_port

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(__file__).parent / "artifacts"


class ConsoleBroker:
    def __init__(self, broker: BrokerProcess, url: str):
        self.broker = broker
        self.url = url
        self.bootstrap_servers = broker.bootstrap_servers


def http_get(url: str, **headers) -> tuple[int, str]:
    """(status, body) of a GET, without a browser."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def start_console_broker(data_dir: Path, **settings) -> ConsoleBroker:
    console_port = free_port()
    broker = BrokerProcess(data_dir, settings={"console.port": console_port, "metrics.port": free_port(),
                                               "group.initial.rebalance.delay.ms": 0,
                                               "offsets.topic.num.partitions": 1, **settings})
    broker.start()
    return ConsoleBroker(broker, f"http://127.0.0.1:{console_port}/")


@pytest.fixture(scope="module")
def console(tmp_path_factory):
    """A broker process serving the console on 127.0.0.1 (console.port) and metrics (metrics.port)."""
    served = start_console_broker(tmp_path_factory.mktemp("console") / "data")
    yield served
    served.broker.stop()


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory):
    if not CHROMIUM.exists():
        if os.geteuid() != 0:
            pytest.skip(f"no {CHROMIUM} and not root: install Debian's chromium and chromium-driver "
                        "(make system-packages as root) to run the console's browser tests")
        pytest.fail(f"no {CHROMIUM}: run make system-packages (as root it installs chromium)")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            tmp_path_factory.mktemp("chromium-profile"), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1280, "height": 900})
        yield context
        context.close()


@pytest.fixture
def page(browser_context):
    """A fresh tab; the test fails if the browser logged a console error or a script threw."""
    tab = browser_context.new_page()
    errors: list[str] = []
    tab.on("console", lambda message: errors.append(f"console {message.type}: {message.text}")
           if message.type == "error" else None)
    tab.on("pageerror", lambda error: errors.append(f"page error: {error}"))
    tab.console_errors = errors
    yield tab
    tab.close()
    assert errors == [], errors


def screenshot(page, name: str) -> Path:
    """Save the whole page as tests/console/artifacts/<name>.png."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path

