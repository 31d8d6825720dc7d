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
