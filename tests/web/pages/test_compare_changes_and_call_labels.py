"""The compare page shows what changed inside values (words, keys), and the run page, the fork form
and the compare page name each call the same way (tool, arguments in short, step)."""
import pytest
from django.contrib.auth.models import Group, User
from django.urls import reverse

from runs.engine.loop import run_advance
from runs.lifecycle import forks
from runs.lifecycle.forks import run_fork
from runs.models import Run
from toolsapp.models import Tool
from toolsapp.sensitive import MASK

WEATHER = {"tool_calls": [{"id": "w1", "name": "get_weather", "arguments": {"city": "Lagos"}}]}


def search(query: str) -> dict:
    return {"tool_calls": [{"id": "s1", "name": "search_tickets", "arguments": {"query": query}}]}


@pytest.fixture
def operator(demo_data):
    user = User.objects.create_user("otto")
    user.groups.add(Group.objects.get(name="operators"))
    return user


@pytest.fixture
def parent_and_fork(launch, script, operator, monkeypatch):
    """A run and its fork from step 1: the fork searched other words and answered otherwise."""
    monkeypatch.setattr(forks, "run_dispatch", lambda *, run_id: None)  # the fork runs here, below
    model = script(WEATHER, search("heat alerts"), {"content": "The weather in Lagos is hot today."},
                   search("snow alerts"), {"content": "The weather in Lagos is cold today."})
    parent = launch("Weather in Lagos", models=[model])
    fork = run_fork(run_id=parent.pk, step_index=1, user=operator, edit=None)
    run_advance(run_id=fork.pk)
    fork.refresh_from_db()
    assert parent.status == fork.status == Run.Status.SUCCEEDED
    return parent, fork


def columns(page: str) -> tuple[str, str]:
    """The compare table's parent cells and fork cells, each joined."""
    body = page.split('id="compare-table"', 1)[1]
    parent = "".join(cell.split("</td>", 1)[0] for cell in body.split('class="compare-parent"')[1:])
    fork = "".join(cell.split("</td>", 1)[0] for cell in body.split('class="compare-fork"')[1:])
    return parent, fork


def test_compare_marks_the_words_and_keys_that_changed(client, operator, parent_and_fork):
    parent, fork = parent_and_fork
    client.force_login(operator)
    page = client.get(reverse("run_compare", args=[fork.pk])).content.decode()
    parent_cells, fork_cells = columns(page)
    assert '<del class="change-removed">hot</del>' in parent_cells and "<ins" not in parent_cells.split("compare-keys")[0]
    assert '<ins class="change-added">cold</ins>' in fork_cells
    # The arguments' key that changed, from the parent's value to the fork's, on both sides.
    for cells in (parent_cells, fork_cells):
        assert 'data-change="changed" data-path="query"' in cells
        assert '<del class="change-removed mono">&quot;heat alerts&quot;</del>' in cells
        assert '<ins class="change-added mono">&quot;snow alerts&quot;</ins>' in cells
    # The final answers, word by word, in the foot.
    foot = page.split('id="compare-outcome"', 1)[1]
    assert '<del class="change-removed">hot</del>' in foot and '<ins class="change-added">cold</ins>' in foot
    # Arguments are left for the tree (indented JSON the page's script reads).
    assert 'data-json-tree="the arguments of search_tickets in step 2"' in page


def test_the_run_page_the_fork_form_and_the_compare_page_name_a_call_alike(client, operator, parent_and_fork):
    parent, fork = parent_and_fork
    client.force_login(operator)
    label = ('<span class="call-tool mono">search_tickets</span><span class="call-args-short mono">'
             '(query=&quot;heat alerts&quot;)</span> <span class="call-step muted">· step 2</span>')
    run_page = client.get(reverse("run_detail", args=[parent.pk])).content.decode()
    fork_form = client.get(reverse("run_fork", args=[parent.pk]), {"step": 2}).content.decode()
    compare = client.get(reverse("run_compare", args=[fork.pk])).content.decode()
    assert label in run_page and label in fork_form and label in columns(compare)[0]
    assert label.replace("heat", "snow") in columns(compare)[1]
    # The fork form's choice of call reads the same, in words.
    assert '>search_tickets(query=&quot;heat alerts&quot;) · step 2</option>' in fork_form


def test_a_sensitive_field_is_masked_in_every_label_and_in_the_servers_json(client, operator, launch, script):
    Tool.objects.filter(name="get_weather").update(sensitive_fields=["city"])
    run = launch("Weather in Lagos", models=[script(WEATHER, {"content": '{"city": "Lagos", "nested": {"a": [1]}}'})])
    client.force_login(operator)
    page = client.get(reverse("run_detail", args=[run.pk])).content.decode()
    timeline = page.split('id="timeline"', 1)[1]
    assert f"(city=&quot;{MASK}&quot;)" in timeline and f"&quot;city&quot;: &quot;{MASK}&quot;" in timeline
    fork_form = client.get(reverse("run_fork", args=[run.pk]), {"step": 1}).content.decode()
    assert f"get_weather(city=&quot;{MASK}&quot;) · step 1</option>" in fork_form
    # The model's JSON answer reads indented without JavaScript, and the tree takes it from there.
    assert 'data-json-tree="the model&#x27;s answer in step 2"' in timeline
    assert "{\n  &quot;city&quot;: &quot;Lagos&quot;,\n  &quot;nested&quot;: {" in timeline
