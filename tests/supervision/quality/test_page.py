"""The Supervision page over the seeded history: a project's operators read everyone's figures
and each person's line, anyone reads their own, and another project's decisions never count."""
import re

import pytest
from django.urls import reverse

from tests.projects import member
from tests.supervision.quality.history import history

pytestmark = pytest.mark.django_db


@pytest.fixture
def h():
    return history()


def page(client, user, **query) -> str:
    client.force_login(user)
    response = client.get(reverse("supervision"), query)
    assert response.status_code == 200
    return response.content.decode()


def section(html: str, element_id: str) -> str:
    """The element with this id and what follows it, up to its closing </section>."""
    start = html.index(f'id="{element_id}"')
    return html[start:html.index("</section>", start)]


def data(html: str, element_id: str, name: str) -> str:
    found = re.search(rf'data-{name}="([^"]*)"', section(html, element_id))
    assert found, f"no data-{name} in #{element_id}"
    return found.group(1)


def test_an_operator_reads_the_projects_time_to_decide_quick_and_contradicted_approvals(client, h):
    html = page(client, h.alice, project="shop")
    assert (data(html, "figure-time-to-decide", "p50"), data(html, "figure-time-to-decide", "p90")) == ("8.0", "60.0")
    assert data(html, "figure-decisions", "value") == "11"
    assert data(html, "figure-quick", "value") == "5"
    assert "within 5 s of its card appearing" in section(html, "figure-quick")
    assert data(html, "figure-contradicted", "value") == "4"
    assert (data(html, "figure-contradicted", "failed"), data(html, "figure-contradicted", "moot"),
            data(html, "figure-contradicted", "reversed")) == ("1", "2", "1")
    assert data(html, "figure-shadow", "value") == "66.7"
    people = section(html, "people")
    assert 'data-person="alice"' in people and 'data-person="bob"' in people and "carol" not in people
    waits = section(html, "longest-waits")
    assert waits.index(f'data-approval="{h.approvals["waiting"].pk}"') < waits.index(
        f'data-approval="{h.approvals["expired"].pk}"')
    assert reverse("approval_detail", args=[h.approvals["waiting"].pk]) in waits
    assert f'data-approval="{h.approvals["failed"].pk}" data-why="failed"' in section(html, "contradicted")
    assert 'id="metrics-series"' in html and 'id="series-time-to-decide"' in html


def test_just_me_shows_only_my_own_decisions(client, h):
    html = page(client, h.bob, project="shop", whose="me")
    assert data(html, "figure-decisions", "value") == "3"
    assert (data(html, "figure-time-to-decide", "p50"), data(html, "figure-quick", "value")) == ("8.0", "1")
    assert data(html, "figure-contradicted", "value") == "0"
    assert 'id="people"' not in html
    assert f'data-approval="{h.approvals["failed"].pk}"' not in html  # alice's call


def test_a_viewer_sees_only_their_own_figures_even_when_asking_for_everyones(client, h):
    vera = member("vera", h.shop, "viewers")
    html = page(client, vera, project="shop", whose="everyone")
    assert 'id="only-yours"' in html
    assert data(html, "figure-decisions", "value") == "0"
    assert 'id="people"' not in html and 'value="everyone"' not in html
    assert "alice" not in section(html, "longest-waits")


def test_another_teams_project_is_never_shown(client, h):
    html = page(client, h.carol, project="shop")
    assert '<option value="shop"' not in html
    assert 'id="people"' in html and 'data-person="carol"' in html and "alice" in section(html, "people")
    assert data(html, "figure-decisions", "value") == "3"  # Other's: alice's one and carol's two


def test_signed_out_people_are_sent_to_sign_in(client):
    response = client.get(reverse("supervision"))
    assert response.status_code == 302 and "login" in response["Location"]
