"""Browser steps the journeys share: signing in and out, answering survey questions, dropping a file."""

from __future__ import annotations

import re

from playwright.sync_api import expect


def login(page, username: str, password: str) -> None:
    """Sign in through the real login form."""
    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_load_state("networkidle")


def sign_out(page) -> None:
    page.click("button:has-text('Sign out')")
    expect(page.locator(".messages")).to_contain_text("You are signed out")


def answer_choice(page, code: str, label: str) -> None:
    page.locator(f"#question-{code}").get_by_text(label, exact=False).first.click()


def answer_likert(page, code: str, value: int) -> None:
    page.locator(f"label[for='q_{code}-{value}']").click()


def drop_file(page, kind: str, name: str, text: str) -> None:
    """Drag a file onto an upload zone (a synthetic drop carrying a real File, as the browser would)."""
    page.locator(f"form.js-upload[data-kind='{kind}'] .drop-area").evaluate(
        """(area, [name, text]) => {
            const data = new DataTransfer();
            data.items.add(new File([text], name, { type: "text/plain" }));
            area.dispatchEvent(new DragEvent("drop", { dataTransfer: data, bubbles: true, cancelable: true }));
        }""", [name, text])


def wait_saved(page) -> None:
    # A locator assertion, not wait_for_function: that evaluates a string, which the pages' CSP forbids.
    # The page sends answers a few seconds after they are given (SURVEY_AUTOSAVE_SECONDS), then says so.
    expect(page.locator("#autosave-status")).to_contain_text("saved", timeout=15_000)


def finish_pre_survey(page) -> None:
    """Answer A4, A5 and A7 as every journey does, then submit the pre-survey."""
    page.locator("label[for='q_A4-H3']").click()
    page.locator("label[for='q_A5-H4']").click()
    answer_choice(page, "A7", "Curious")
    page.get_by_role("button", name="Submit answers").click()


def open_task(page, position: int) -> None:
    """From the task's start page, reveal the task (the click that starts its clock)."""
    page.wait_for_url(re.compile(rf"/tasks/{position}/$"))
    page.get_by_role("button", name=f"Show me task {position}").click()
    page.wait_for_url(re.compile(rf"/tasks/{position}/$"))

def close_quietly(context) -> None:
    """Close a browser context without letting its pages reach the server again: closing hides a page, and a
    page's autosave-on-hide request would otherwise arrive while the test database is being emptied (a
    deadlock with the flush that failed a test's teardown)."""
    context.route("**/*", lambda route: route.abort())
    context.close()
