"""Single sign-on in the browser, against a real OpenID Connect provider process: sign in at the
provider, roles from its groups (operators decide, viewers do not), a role taken away at the
provider gone at the next sign-in (also on a websocket opened before), sign-out."""

import re

import pytest
from playwright.sync_api import expect

from accounts.models import SsoIdentity
from runs.models import Approval, Run
from tests.accounts.browser.conftest import new_person, sign_in_at_provider
from tests.browser import CANCEL_ORDER, mark_page, requires_chromium, screenshot, still_same_page

pytestmark = [pytest.mark.browser, requires_chromium]

OPERATORS, VIEWERS = "agentsite-operators", "everyone"


def sso_sign_in(browser, username: str, *, start: str = "/approvals/"):
    """A new person opens `start`, is sent to this site's sign-in page, chooses single sign-on and
    signs in at the provider; returns their page, signed in here."""
    page = new_person(browser)
    page.goto(start)
    expect(page).to_have_url(re.compile(r"/login/"))
    expect(page.locator("input[name=password]")).to_have_count(0)  # LOCAL_SIGNIN=off: no password form
    screenshot(page, "sign-in-single-sign-on")
    page.locator("#sso-signin").click()
    sign_in_at_provider(page, username)
    expect(page.locator("header .who")).to_contain_text(username)
    return page


def open_queue(page):
    page.goto("/approvals/")
    expect(page.locator("#approval-live-status")).to_have_text("Live updates: on.")
    return page


def open_socket(page) -> None:
    """A websocket of the approval queue, opened from the page (its cookies), kept in the page."""
    page.evaluate("""() => new Promise((resolve, reject) => {
        const socket = new WebSocket(`ws://${location.host}/ws/approvals/`);
        window.__answers = [];
        socket.onmessage = (event) => {
            const data = JSON.parse(event.data);
            if (data.type !== "approvals.changed") window.__answers.push(data);
        };
        socket.onopen = () => { window.__socket = socket; resolve(); };
        socket.onerror = () => reject(new Error("the websocket did not open"));
    })""")


def decide_over_socket(page, approval_id: int) -> dict:
    """Sends an approval over the page's websocket; its answer."""
    return page.evaluate(
        """(id) => new Promise((resolve) => {
        const before = window.__answers.length;
        window.__socket.send(JSON.stringify({type: "decide", approval_id: id, approve: true}));
        const wait = () => window.__answers.length > before ? resolve(window.__answers[before]) : setTimeout(wait, 50);
        wait();
    })""",
        approval_id,
    )


def pending_approval(run) -> Approval:
    return Approval.objects.get(run=run, status=Approval.Status.PENDING)


def test_operator_from_the_provider_decides_a_viewer_does_not(site, browser, launch):
    site.provider.person("olivia", OPERATORS)
    site.provider.person("victor", VIEWERS)
    run = launch(CANCEL_ORDER)
    assert run.status == Run.Status.AWAITING_APPROVAL
    approval = pending_approval(run)

    viewer = sso_sign_in(browser, "victor")
    expect(viewer).to_have_url(re.compile(r"/approvals/$"))  # back where they were going
    open_queue(viewer)
    expect(viewer.locator(f".approval[data-approval-id='{approval.pk}']")).to_be_visible()
    expect(viewer.locator(".approve-button")).to_have_count(0)

    operator = open_queue(sso_sign_in(browser, "olivia"))
    card = operator.locator(f".approval[data-approval-id='{approval.pk}']")
    card.locator(".approve-button").click()
    expect(operator.locator("#approval-list .approval")).to_have_count(0)
    approval.refresh_from_db()
    assert approval.status == Approval.Status.APPROVED
    assert approval.decided_by.username == "olivia"
    identity = SsoIdentity.objects.get(user__username="olivia")
    assert identity.issuer == site.provider.issuer and identity.roles == ["operator"]


def test_person_without_a_mapped_group_is_refused(site, browser):
    site.provider.person("carol", "contractors")
    page = new_person(browser)
    page.goto("/login/")
    page.locator("#sso-signin").click()
    sign_in_at_provider(page, "carol")
    expect(page).to_have_url(re.compile(r"/login/"))
    expect(page.locator(".messages")).to_contain_text("none of your groups there gives a role here")
    expect(page.locator("header .who")).to_have_count(0)
    assert not SsoIdentity.objects.filter(user__username="carol").exists()


def test_next_pointing_elsewhere_lands_on_this_site(site, browser):
    site.provider.person("nina", VIEWERS)
    page = new_person(browser)
    page.goto("/oidc/authenticate/?next=https://evil.example.test/steal")
    sign_in_at_provider(page, "nina")
    expect(page.locator("header .who")).to_contain_text("nina")
    assert page.url.startswith(site.url + "/")


def test_operator_removed_at_the_provider_loses_the_right_at_next_sign_in_also_on_an_open_socket(
    site,
    browser,
    launch,
):
    site.provider.person("otto", OPERATORS)
    first, second = launch(CANCEL_ORDER), launch(CANCEL_ORDER)
    first_approval, second_approval = pending_approval(first), pending_approval(second)

    old_page = open_queue(sso_sign_in(browser, "otto"))
    mark_page(old_page)
    open_socket(old_page)
    answer = decide_over_socket(old_page, first_approval.pk)
    assert answer["type"] == "decided", answer  # the socket decides while otto is an operator
    first_approval.refresh_from_db()
    assert first_approval.status == Approval.Status.APPROVED

    # The provider's administrator takes otto out of the operators; otto signs in again elsewhere.
    site.provider.person("otto", VIEWERS)
    new_page = open_queue(sso_sign_in(browser, "otto"))
    expect(new_page.locator(f".approval[data-approval-id='{second_approval.pk}']")).to_be_visible()
    expect(new_page.locator(".approve-button")).to_have_count(0)

    # The old page, never reloaded, with its socket still open: both ways to decide are refused.
    answer = decide_over_socket(old_page, second_approval.pk)
    assert answer == {"type": "error", "error": "permission denied"}
    old_card = old_page.locator(f".approval[data-approval-id='{second_approval.pk}']")
    old_card.locator(".approve-button").click()
    # Said beside the card the person acted on (not again at the top of the page).
    expect(old_page.locator(f"#answer-{second_approval.pk}")).to_contain_text("not recorded")
    assert still_same_page(old_page)
    second_approval.refresh_from_db()
    assert second_approval.status == Approval.Status.PENDING
    assert SsoIdentity.objects.get(user__username="otto").roles == ["viewer"]


def test_sign_out_ends_the_session_here_and_at_the_provider(site, browser):
    site.provider.person("sam", VIEWERS)
    page = sso_sign_in(browser, "sam", start="/runs/")
    page.locator("header .who button").click()  # Sign out
    expect(page).to_have_url(re.compile(r"/login/"))
    expect(page.locator("header .who")).to_have_count(0)
    page.goto("/runs/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/runs/"))
    # The provider's session ended too: single sign-on asks for the password again.
    page.locator("#sso-signin").click()
    expect(page.locator("#op-login")).to_be_visible()
