"""'Your settings': who is told what about notifications for calls to decide (the switches
themselves work in the browser: tests/browser/test_browser_notifications.py)."""
from django.test import Client

from tests.support.approval_fixtures import make_user


def page_of(user) -> str:
    client = Client()
    client.force_login(user)
    response = client.get("/settings/you/")
    assert response.status_code == 200
    return response.content.decode()


def test_an_operator_may_turn_notifications_on(alice):
    html = page_of(alice)
    assert 'data-may-decide="true"' in html and 'id="notify-refusal"' not in html
    assert "js/personal_settings.js" in html and "js/notify.js" in html
    assert 'href="/settings/you/"' in html  # the user's name in the top bar leads here


def test_a_viewer_is_told_that_nothing_would_be_announced(viewer):
    html = page_of(viewer)
    assert 'data-may-decide="false"' in html
    assert "may view calls but not decide them" in html


def test_a_user_without_a_role_sees_the_page_without_the_approvals_scripts(demo_data):
    html = page_of(make_user("nobody", None))
    assert "does not see the approval queue" in html
    assert "js/notify.js" not in html and "js/personal_settings.js" not in html


def test_signed_out_people_are_sent_to_sign_in(demo_data):
    response = Client().get("/settings/you/")
    assert response.status_code == 302 and response.url.startswith("/login/")


def test_the_api_is_at_hand_from_the_header_and_your_settings(viewer):
    """The header's API link opens the reference; "Your settings" leads to the tokens page."""
    html = page_of(viewer)
    assert 'id="nav-api-docs"' in html and 'href="/api/docs/"' in html
    assert '<a href="/account/tokens/" id="settings-tokens">your API tokens</a>' in html
    client = Client()
    client.force_login(viewer)
    assert client.get("/api/docs/").status_code == 200
    assert client.get("/account/tokens/").status_code == 200


def test_mcp_servers_are_in_the_header_of_those_who_change_tools_and_on_the_tools_page_for_all(viewer):
    client = Client()
    client.force_login(viewer)
    tools = client.get("/tools/").content.decode()
    assert 'id="nav-mcp"' not in tools  # a viewer's header keeps one row at a laptop's width
    assert '<a href="/tools/mcp/" id="tools-mcp-link">MCP servers</a>' in tools
    admin = make_user("ada", "admins")
    client.force_login(admin)
    assert 'id="nav-mcp"' in client.get("/tools/").content.decode()


def test_every_page_names_its_icon_and_the_browsers_default_address_finds_it(viewer):
    html = page_of(viewer)
    assert 'rel="icon"' in html and "favicon.svg" in html
    response = Client().get("/favicon.ico")
    assert response.status_code == 301 and response.url.endswith("favicon.svg")
