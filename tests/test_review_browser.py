"""The review page in a real browser: Debian's chromium driven headless through its
chromedriver by Selenium (nothing downloads a browser). The page is loaded from disk;
the player steps through the reference episode with the buttons and the keyboard, and
at each step the highlighted transition, the state and the evidence revision shown
are the trace's; the page makes no network request; it works without JavaScript; a
screenshot of each view goes into the test's output directory.

In CI (CI=true, and .ci/run installs chromium and chromium-driver) a missing browser
fails these tests; elsewhere they are skipped, saying what to install.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replan.cli import main
from replan.spec.declaration import Replanning
from replan.spec.model import extract

#: Every test here draws with Graphviz (skipped, with the reason, without it).
pytestmark = pytest.mark.graphviz

ROOT = Path(__file__).resolve().parent.parent
EVIDENCE = ROOT / "evidence"
MODEL = extract(Replanning)
INTERNAL = {t.label: t for t in MODEL.transitions if t.internal and t.source == t.target}
BY_LABEL = {t.label: t for t in MODEL.transitions}
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
WIDTH = 1200


def _browser_or_reason() -> tuple[str, str, str]:
    """(chromium, chromedriver, "") or ("", "", why they cannot be used)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or ""
    driver = shutil.which("chromedriver") or ""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "", "", "selenium is not installed (pip install -e '.[review]')"
    if not chromium or not driver:
        return (
            "",
            "",
            "chromium or chromedriver is missing (apt-get install chromium chromium-driver)",
        )
    return chromium, driver, ""


def _missing(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI installs the browser, so this must run: {reason}")
    pytest.skip(reason)


def _driver(profile: Path, javascript: bool = True) -> Any:
    """Chromium with a fresh profile in ``profile`` (the test's own directory)."""
    chromium, driver, reason = _browser_or_reason()
    if reason:
        _missing(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={WIDTH},1000")
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    if not javascript:
        options.add_experimental_option(
            "prefs", {"profile.managed_default_content_settings.javascript": 2}
        )
    return webdriver.Chrome(service=Service(driver), options=options)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("review") / "review.html"
    assert main(["review", "--evidence", str(EVIDENCE), "-o", str(output)]) == 0
    return output


@pytest.fixture
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    driver = _driver(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield driver
    finally:
        driver.quit()


def _text(browser: Any, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return str(browser.find_element(By.ID, element_id).text)


def _fired(browser: Any, view: str) -> list[dict[str, str]]:
    """The highlighted elements of one view: their ids and their titles."""
    return list(
        browser.execute_script(
            "return Array.from(document.querySelectorAll(`#view-${arguments[0]} .fired`))"
            ".map(e => ({id: e.id, title: (e.querySelector('title') || {}).textContent || ''}))",
            view,
        )
    )


def _current_states(browser: Any) -> list[str]:
    return list(
        browser.execute_script(
            "return Array.from(document.querySelectorAll('g.current')).map(e => e.id)"
        )
    )


def _expected_overview(label: str) -> set[str]:
    """Where the overview draws a transition, from the declaration (not the page's
    own map): an internal one is its state's folded line for the event, any other its
    arrow and its row."""
    transition = BY_LABEL[label]
    if label in INTERNAL:
        return {f"ov-a_fold-{transition.source}-{transition.event}"}
    found = {f"ov-t{transition.index}", f"ov-a_t{transition.index}-row"}
    if transition.cond:
        found.add(f"ov-a_t{transition.index}-guard")
    return found


def test_the_player_steps_through_the_reference_episode(browser: Any, page: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    calls = json.loads((EVIDENCE / "replan-trace.json").read_text(encoding="utf-8"))["calls"]
    browser.get(page.as_uri())
    assert _text(browser, "player-position") == f"step 0 of {len(calls)}"
    assert _current_states(browser) == ["ov-state-idle", "full-state-idle"]
    answers = []
    for number, call in enumerate(calls, start=1):
        if number % 2:
            browser.find_element(By.ID, "player-next").click()
        else:  # the keyboard works too
            browser.find_element(By.TAG_NAME, "body").send_keys(Keys.ARROW_RIGHT)
        assert _text(browser, "player-position") == f"step {number} of {len(calls)}"
        label = call["transition"]
        assert _text(browser, "player-transition") == label
        assert _text(browser, "player-evidence-revision") == str(call["evidence_revision"])
        answers.append(_text(browser, "player-answer"))
        full = _fired(browser, "full")
        row = [f for f in full if f["id"] == f"full-a_t{BY_LABEL[label].index}-row"]
        assert row and row[0]["title"] == label, (number, full)  # the row titled with it
        overview = _fired(browser, "overview")
        assert {f["id"] for f in overview} == _expected_overview(label), (number, overview)
        target = BY_LABEL[label].target
        assert _current_states(browser) == [f"ov-state-{target}", f"full-state-{target}"]
        stop = call["stop_reason"] or "none (active)"
        assert _text(browser, "player-stop-reason") == stop
        rows = browser.find_elements(By.CSS_SELECTOR, "tr.step.current")
        assert [r.get_attribute("data-step") for r in rows] == [str(number)]
    assert answers.count("Executed") == 2
    assert answers[answers.index("PreconditionDenied") :].count("StalePlan") == 1
    assert "proposals 4 of 8" in _text(browser, "player-counters")
    assert (
        _text(browser, "player-next")
        and not browser.find_element(By.ID, "player-next").is_enabled()
    )
    # back, and to either end with Home and End
    browser.find_element(By.ID, "player-prev").click()
    assert _text(browser, "player-transition") == calls[-2]["transition"]
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.HOME)
    assert _text(browser, "player-position") == f"step 0 of {len(calls)}"
    assert _fired(browser, "full") == []
    body.send_keys(Keys.END)
    assert _text(browser, "player-stop-reason") == "Completed"
    # play moves on by itself, and pauses
    body.send_keys(Keys.HOME)
    browser.find_element(By.ID, "player-play").click()
    deadline = time.monotonic() + 5
    while _text(browser, "player-position").startswith("step 0") and time.monotonic() < deadline:
        time.sleep(0.1)
    browser.find_element(By.ID, "player-play").click()
    assert not _text(browser, "player-position").startswith("step 0")
    assert browser.get_log("browser") == []  # no script error


def test_the_page_makes_no_network_request(browser: Any, page: Path) -> None:
    browser.get("about:blank")
    browser.get_log("performance")  # what the new tab page did before: not ours
    browser.get(page.as_uri())
    from selenium.webdriver.common.by import By

    for _ in range(3):
        browser.find_element(By.ID, "player-next").click()
    browser.find_element(By.CSS_SELECTOR, "[data-show-view=full]").click()
    messages = [json.loads(entry["message"])["message"] for entry in browser.get_log("performance")]
    requests = [m["params"] for m in messages if m["method"] == "Network.requestWillBeSent"]
    ours = [r["request"]["url"] for r in requests if r.get("documentURL") == page.as_uri()]
    assert ours == [page.as_uri()]  # the page itself, and nothing it asked for
    assert not [
        r["request"]["url"]
        for r in requests
        if r["request"]["url"].split(":", 1)[0] in ("http", "https", "ws", "wss")
    ]


def test_each_view_is_shown_and_saved_as_a_screenshot(
    browser: Any, page: Path, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    browser.get(page.as_uri())
    for _ in range(8):  # to the PreconditionDenied step: an internal row in pending
        browser.find_element(By.ID, "player-next").click()
    for view in ("overview", "full"):
        browser.find_element(By.CSS_SELECTOR, f"[data-show-view={view}]").click()
        shown = browser.find_element(By.ID, f"view-{view}")
        assert shown.is_displayed()
        other = "full" if view == "overview" else "overview"
        assert not browser.find_element(By.ID, f"view-{other}").is_displayed()
        # the whole page, this view shown: a window as tall as the document
        height = browser.execute_script("return document.documentElement.scrollHeight")
        browser.set_window_size(WIDTH, min(int(height), 8000))
        target = tmp_path / f"review-{view}.png"
        assert browser.save_screenshot(str(target))
        assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        browser.set_window_size(WIDTH, 1000)
    # the overview, as a reviewer's 1200 px window shows it: text of 11 px and more
    browser.find_element(By.CSS_SELECTOR, "[data-show-view=overview]").click()
    width, scale_text = browser.execute_script(
        "const svg = document.querySelector('#view-overview svg');"
        "const box = svg.getBoundingClientRect();"
        "const sizes = Array.from(svg.querySelectorAll('text'))"
        "  .map(t => parseFloat(t.getAttribute('font-size')));"
        "return [box.width, Math.min(...sizes) * box.width / svg.viewBox.baseVal.width];"
    )
    assert width <= WIDTH and scale_text >= 11, (width, scale_text)
    assert browser.execute_script("return document.documentElement.scrollWidth") <= WIDTH


def test_without_javascript_everything_but_the_player_is_there(
    page: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from selenium.webdriver.common.by import By

    driver = _driver(tmp_path_factory.mktemp("chromium-profile"), javascript=False)
    try:
        driver.get(page.as_uri())
        assert driver.find_element(By.ID, "view-overview").is_displayed()
        assert driver.find_element(By.ID, "view-full").is_displayed()  # both, one after another
        assert not driver.find_element(By.ID, "player").is_displayed()
        assert len(driver.find_elements(By.CSS_SELECTOR, "tr.step")) == 12
        assert driver.find_element(By.ID, "verify").is_displayed()
        assert "All checks hold" in driver.find_element(By.ID, "verdict").text
    finally:
        driver.quit()


def test_the_player_without_a_recording_raises_no_script_error(
    browser: Any, tmp_path: Path
) -> None:
    """A policy's page before any recording exists (no counterexample, no episode):
    the views still switch and the script reports no error."""
    from selenium.webdriver.common.by import By

    evidence = tmp_path / "evidence"
    evidence.mkdir()
    shutil.copy(EVIDENCE / "verify.json", evidence / "verify.json")
    output = tmp_path / "review.html"
    assert main(["review", "--evidence", str(evidence), "-o", str(output)]) == 0
    browser.get(output.as_uri())
    time.sleep(0.5)
    assert browser.get_log("browser") == []  # no script error
    browser.find_element(By.CSS_SELECTOR, '[data-show-view="full"]').click()
    assert browser.find_element(By.ID, "view-full").is_displayed()
    assert not browser.find_element(By.ID, "view-overview").is_displayed()
    assert browser.get_log("browser") == []
