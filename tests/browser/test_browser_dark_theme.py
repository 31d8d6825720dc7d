"""The dark theme: with the system set to dark, the main pages are dark (not a white page with
light text) and pass axe-core as the light ones do; "Your settings" passes in both."""
import pytest

from runs.models import Approval, Run
from tests.browser import (
    CANCEL_ORDER,
    assert_no_violations,
    axe_violations,
    requires_chromium,
    screenshot,
    screenshot_dir,
    wait_for_seq,
)

pytestmark = [pytest.mark.browser, requires_chromium]

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
SCHEMES = ("dark", "light")


def luminance(css_colour: str) -> float:
    """Relative luminance (WCAG) of "rgb(r, g, b)" as getComputedStyle gives it."""
    r, g, b = (int(part) / 255 for part in css_colour[css_colour.index("(") + 1:].rstrip(")").split(",")[:3])
    channel = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    return 0.2126 * channel[0] + 0.7152 * channel[1] + 0.0722 * channel[2]


def background_of(page, selector: str = "body") -> float:
    # Waited for: a page that reloads itself on an event (the queue when a call arrives) has, for
    # a moment, a document without a window, whose elements have no computed style ("").
    colour = page.wait_for_function(
        """selector => {
            const element = document.querySelector(selector);
            const colour = element && document.defaultView ? getComputedStyle(element).backgroundColor : "";
            return colour || null;
        }""",
        arg=selector,
    ).json_value()
    return luminance(colour)


def look(page, scheme: str, name: str, found: dict, *, check: bool, phone: bool = False) -> None:
    """Axe at desktop width (when `check`) and at phone width (when `phone` too), and the
    screenshots at both widths (when SCREENSHOT_DIR is set) in `scheme`. The layout at phone width
    is test_browser_cockpit's; the colours are the same at both."""
    for size in (DESKTOP, PHONE):
        width = "desktop" if size is DESKTOP else "phone"
        if size is PHONE and not (phone or screenshot_dir()):
            continue
        page.set_viewport_size(size)
        if check and (size is DESKTOP or phone):
            found[f"{name} ({scheme}, {width})"] = axe_violations(page)
        screenshot(page, f"{scheme}-{width}-{name}")


def test_the_main_pages_are_dark_and_pass_axe_when_the_system_is_dark(live, browser, users, launch):
    run = launch(CANCEL_ORDER)
    assert run.status == Run.Status.AWAITING_APPROVAL
    approval = Approval.objects.get(run=run)
    pages = {
        "runs": "/runs/", "run": f"/runs/{run.pk}/", "approvals": "/approvals/", "approval": f"/approvals/{approval.pk}/",
        "agents": "/agents/", "tools": "/tools/", "launch": "/runs/new/", "settings": "/settings/you/",
    }
    found: dict[str, list[str]] = {}
    page = browser.login(users["operator"])
    for scheme in SCHEMES:
        page.emulate_media(color_scheme=scheme)
        for name, path in pages.items():
            if scheme == "light" and name != "settings" and not screenshot_dir():
                continue  # light: only the new page is checked here, the others only pictured
            page.set_viewport_size(DESKTOP)
            page.goto(path)
            if name == "run":
                wait_for_seq(page, run.event_seq)  # its timeline is drawn from what the socket sends
            if scheme == "dark":
                assert background_of(page) < 0.05, f"{path} is not dark"
                assert background_of(page, "main .card, main table") < 0.05, f"a light box on {path}"
            # Light: the other pages' axe checks are test_browser_cockpit's; the settings page is new.
            look(page, scheme, name, found, check=scheme == "dark" or name == "settings", phone=name == "settings")

    signed_out = browser.chromium.new_context(base_url=browser.base_url, color_scheme="dark")
    login = signed_out.new_page()
    login.goto("/login/")
    assert background_of(login) < 0.05 and background_of(login, "input[name=username]") < 0.05
    look(login, "dark", "login", found, check=True)
    login.emulate_media(color_scheme="light")
    assert background_of(login) > 0.8
    look(login, "light", "login", found, check=False)
    signed_out.close()
    assert_no_violations(found)
