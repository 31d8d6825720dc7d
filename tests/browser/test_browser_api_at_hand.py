"""The API at hand (issue 49), in Chromium at desktop and phone width, light and dark: a person
makes a token limited to their project on the tokens page, sees its key once, uses it over HTTP,
revokes it and it stops working; the API reference renders with every request to another host
blocked; the raw API pages and the error pages fit a phone and pass axe."""
import json
import urllib.error
import urllib.request
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from tests.browser import PASSWORD, assert_no_violations, axe_violations, requires_chromium, screenshot
from tests.projects import member, project

pytestmark = [pytest.mark.browser, requires_chromium]

DESKTOP, PHONE = {"width": 1280, "height": 800}, {"width": 390, "height": 844}
LOOKS = [(scheme, width, size) for scheme in ("light", "dark") for width, size in (("desktop", DESKTOP), ("phone", PHONE))]


def look_everywhere(page, name: str, found: dict) -> None:
    """Axe and a screenshot in each scheme at each width; at phone width nothing scrolls sideways."""
    for scheme, width, size in LOOKS:
        page.emulate_media(color_scheme=scheme)
        page.set_viewport_size(size)
        found[f"{name} ({scheme}, {width})"] = axe_violations(page)
        if size is PHONE:
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= PHONE["width"], f"{name} ({scheme}) is {wide} px wide on a phone"
        screenshot(page, f"api-{name}-{scheme}-{width}")
    page.emulate_media(color_scheme="light")
    page.set_viewport_size(DESKTOP)


def api_status(base: str, path: str, key: str) -> tuple[int, dict | list]:
    """A real HTTP request to the live server with the key, as a script would send it."""
    request = urllib.request.Request(base + path, headers={"Authorization": f"Token {key}", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def test_a_person_makes_a_project_token_sees_it_once_uses_it_and_revokes_it(live, browser):
    alpha = project("Alpha")
    project("Beta")
    olga = member("olga", alpha, "operators", password=PASSWORD)
    page = browser.login(olga)
    page.goto("/account/tokens/")
    expect(page.get_by_role("heading", name="API tokens", level=1)).to_be_visible()
    expect(page.locator("#id_project option")).to_have_text(["Every project you see", "Alpha"])
    found: dict = {}
    look_everywhere(page, "tokens-empty", found)

    page.get_by_label("Name").fill("finance export")
    page.get_by_label("Expires after (days)").fill("7")
    page.get_by_label("Limited to").select_option(label="Alpha")
    page.get_by_role("button", name="Make the token").click()
    key_box = page.locator("#token-key")
    expect(page.locator("#token-new")).to_contain_text("copy its key now")
    key = key_box.input_value()
    assert key.startswith("ags_") and len(key) > 40
    listed = page.locator("#token-list-heading ~ ul li").first
    expect(listed).to_contain_text("finance export")
    expect(listed).to_contain_text("Alpha")
    expect(listed).to_contain_text("Never")  # not used yet
    look_everywhere(page, "tokens-made", found)

    status, runs = api_status(live.url, "/api/v1/runs/", key)
    assert status == 200 and "results" in runs
    status, tokens = api_status(live.url, "/api/v1/tokens/", key)
    assert status == 200 and [(t["name"], t["project"]) for t in tokens] == [("finance export", "alpha")]

    page.goto("/account/tokens/")  # the key is not shown again
    expect(page.locator("#token-list-heading ~ ul li").first).to_contain_text("finance export")
    assert page.locator("#token-key").count() == 0 and key not in page.content()
    last_used = page.locator("#token-list-heading ~ ul li").first.locator("div", has_text="Last used").locator("dd")
    expect(last_used).not_to_have_text("Never")  # the script's request

    page.get_by_role("link", name="Revoke finance export").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Revoke token finance export?")
    look_everywhere(page, "token-revoke", found)
    page.get_by_role("button", name="Revoke finance export").click()
    expect(page.locator(".messages")).to_contain_text("finance export is revoked")
    expect(page.locator("#token-list-heading ~ ul li").first).to_contain_text("Revoked")
    look_everywhere(page, "tokens-revoked", found)
    status, refusal = api_status(live.url, "/api/v1/runs/", key)
    assert status == 401 and refusal["detail"] == "Token has been revoked."
    assert_no_violations(found)


def test_the_api_reference_renders_with_every_other_host_blocked(live, browser, users):
    page = browser.login(users["viewer"])
    ours = urlsplit(live.url).netloc
    elsewhere: list[str] = []

    def only_ours(route):
        if urlsplit(route.request.url).netloc == ours:
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    page.route("**/*", only_ours)
    page.goto("/api/docs/")
    operations = page.locator(".opblock")
    expect(operations.first).to_be_visible()
    assert operations.count() > 40
    expect(page.locator(".opblock-summary-path", has_text="/api/v1/approvals/").first).to_be_visible()
    found: dict = {}
    look_everywhere(page, "reference", found)
    page.locator(".opblock-summary", has_text="/api/v1/runs/").first.click()  # one operation, opened
    expect(page.locator(".opblock.is-open").first).to_contain_text("Parameters")
    look_everywhere(page, "reference-open", found)
    opened = page.locator(".opblock.is-open").first  # "Try it out" asks this server, as the signed-in person
    opened.get_by_role("button", name="Try it out").click()
    opened.get_by_role("button", name="Execute").click()
    expect(opened.locator(".live-responses-table .response-col_status:not(.col_header)").first).to_have_text("200")
    assert elsewhere == []
    assert_no_violations(found)


def test_the_raw_api_pages_and_the_error_pages_fit_a_phone_and_pass_axe(live, browser, users):
    page = browser.login(users["admin"])
    found: dict = {}
    page.goto("/api/v1/agents/")
    expect(page.get_by_role("heading", name="Agent List", level=1)).to_be_visible()
    expect(page.get_by_role("button", name="POST to Agent List")).to_be_visible()
    look_everywhere(page, "raw-agents", found)
    page.goto("/api/v1/runs/")
    expect(page.locator(".api-response")).to_contain_text("HTTP 200 OK")
    look_everywhere(page, "raw-runs", found)
    page.goto("/api/v1/tokens/")  # the raw POST form still sends (with the CSRF token)
    page.get_by_label("Content").fill('{"name": "from the raw page", "days": 2}')
    page.get_by_role("button", name="POST to Token List").click()
    expect(page.locator(".api-response")).to_contain_text("HTTP 201 Created")
    expect(page.locator(".api-response")).to_contain_text('"name": "from the raw page"')
    look_everywhere(page, "raw-token-made", found)
    answer = page.goto("/no/such/page/")
    assert answer.status == 404
    expect(page.get_by_role("heading", level=1)).to_have_text("There is no page here")
    expect(page.locator("main")).to_contain_text("404 Not Found")
    look_everywhere(page, "not-found", found)
    assert_no_violations(found)
