"""Versions of an agent: every save is one (who, when, what changed), runs record theirs, a draft
changes nothing until it is made current, two versions compare field by field, an older version
can be made current again; from the dashboard and the API, with their permissions."""
import pytest
from django.test import Client
from django.urls import reverse

from runs.models import Agent, AgentVersion
from tests.support.approval_fixtures import make_user
from tests.web.api.test_api import api
from toolsapp.models import Tool


@pytest.fixture
def people(demo_data):
    return {role: make_user(f"{role}_v", group) for role, group in
            (("admin", "admins"), ("operator", "operators"), ("viewer", "viewers"))}


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def form_data(agent: Agent, **changes) -> dict:
    """The agent's editor as a person submits it, with `changes`."""
    data = {
        "name": agent.name, "description": agent.description, "system_prompt": agent.system_prompt,
        "model_list": ", ".join(agent.model_list), "base_url": agent.base_url,
        "tools": [t.pk for t in agent.tools.all()], "max_iterations": agent.max_iterations,
        "repeat_limit": agent.repeat_limit, "max_wall_seconds": agent.max_wall_seconds, "max_tokens": agent.max_tokens,
        "max_cost_usd": agent.max_cost_usd, "max_output_tokens": agent.max_output_tokens or "",
        "context_budget_tokens": agent.context_budget_tokens or "", "compact_context": "on" if agent.compact_context else "",
        "first_tool_choice": agent.first_tool_choice, "later_tool_choice": agent.later_tool_choice,
        "parallel_tool_calls": "on" if agent.parallel_tool_calls else "", "stream_answers": "on",
        "provider_options": "{}", "verifier": agent.verifier, "summarize_on_stop": "",
        "approval_timeout_seconds": "", "escalate_after_seconds": "", "escalation_emails": "",
        "daily_token_alert": "", "daily_cost_alert_usd": "",
    }
    data.update(changes)
    return {key: value for key, value in data.items() if value != ""}


def test_every_save_is_a_version_and_runs_record_theirs(people, launch, script):
    admin = signed_in(people["admin"])
    agent = Agent.objects.get(name="demo")
    response = admin.post(reverse("agent_edit", args=[agent.pk]), form_data(agent, system_prompt="Be brief."))
    assert response.status_code == 302
    agent.refresh_from_db()
    first = AgentVersion.objects.get(agent=agent, number=agent.version)
    assert (first.draft, first.created_by_name, first.settings["system_prompt"]) == (False, "admin_v", "Be brief.")
    assert first.settings["tools"] == sorted(agent.tools.values_list("name", flat=True))
    run = launch("hi", models=[script({"content": "ok"})])
    assert run.agent_version == first.number
    page = admin.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert f'id="run-agent-version">version {first.number}</a>' in page

    admin.post(reverse("agent_edit", args=[agent.pk]), form_data(agent, system_prompt="Be brief.\nCite the order.",
                                                                   max_iterations="7"))
    agent.refresh_from_db()
    second = AgentVersion.objects.get(agent=agent, number=agent.version)
    assert second.number == first.number + 1 and second.changed == ["system_prompt", "max_iterations"]
    assert launch("hi", models=[script({"content": "ok"})]).agent_version == second.number
    listing = admin.get(reverse("agent_versions", args=[agent.pk])).content.decode()
    assert "Changed: system prompt, max iterations" in listing and "current" in listing


def test_a_draft_changes_nothing_until_it_is_made_current(people, launch, script):
    admin = signed_in(people["admin"])
    agent = Agent.objects.get(name="demo")
    admin.post(reverse("agent_edit", args=[agent.pk]), form_data(agent))
    agent.refresh_from_db()
    current = agent.version
    response = admin.post(reverse("agent_edit", args=[agent.pk]),
                          form_data(agent, system_prompt="Answer in French.", draft="1", model_list="gpt-x"))
    assert response.status_code == 302 and response.url == reverse("agent_versions", args=[agent.pk])
    agent.refresh_from_db()
    draft = AgentVersion.objects.get(agent=agent, draft=True)
    assert agent.version == current and agent.system_prompt != "Answer in French." and agent.model_list == []
    assert launch("hi", models=[script({"content": "ok"})]).agent_version == current
    assert f"Saving makes version {draft.number + 1}:" in admin.get(reverse("agent_edit", args=[agent.pk])).content.decode()

    compare = admin.get(reverse("agent_version_compare", args=[agent.pk]), {"a": current, "b": draft.number})
    html = compare.content.decode()
    assert compare.status_code == 200 and 'id="difference-system_prompt"' in html
    assert '<span class="added">+Answer in French.</span>' in html and 'id="difference-model_list"' in html
    assert 'id="difference-max_iterations"' not in html

    response = admin.post(reverse("agent_version_make_current", args=[agent.pk, draft.number]))
    assert response.status_code == 302
    agent.refresh_from_db()
    assert agent.version == draft.number + 1 and agent.system_prompt == "Answer in French."
    assert agent.model_list == ["gpt-x"]
    assert AgentVersion.objects.get(agent=agent, number=agent.version).note == f"made current from version {draft.number}"
    # What the new version changed is shown against the version current before it, never the draft.
    listing = admin.get(reverse("agent_versions", args=[agent.pk])).content.decode()
    assert f"?a={current}&amp;b={agent.version}\">What it changed" in listing
    compare = admin.get(reverse("agent_version_compare", args=[agent.pk]), {"a": current, "b": agent.version})
    assert "<pre>[&quot;gpt-x&quot;]</pre>" in compare.content.decode()  # settings as JSON, not Python


def test_an_older_version_made_current_brings_its_tools_back(people):
    admin = signed_in(people["admin"])
    agent = Agent.objects.get(name="demo")
    admin.post(reverse("agent_edit", args=[agent.pk]), form_data(agent))
    agent.refresh_from_db()
    old, tools = agent.version, sorted(agent.tools.values_list("name", flat=True))
    admin.post(reverse("agent_edit", args=[agent.pk]), form_data(agent, tools=[Tool.objects.get(name="get_weather").pk]))
    agent.refresh_from_db()
    assert list(agent.tools.values_list("name", flat=True)) == ["get_weather"]
    admin.post(reverse("agent_version_make_current", args=[agent.pk, old]))
    agent.refresh_from_db()
    assert sorted(agent.tools.values_list("name", flat=True)) == tools
    # A version whose tool is disabled since cannot be made current: the rule of every save.
    Tool.objects.filter(name="cancel_order").update(enabled=False)
    response = admin.post(reverse("agent_version_make_current", args=[agent.pk, old]), follow=True)
    assert "cannot be made current" in response.content.decode() and "cancel_order" in response.content.decode()


def test_who_may_see_and_change_versions(people, client):
    agent = Agent.objects.get(name="demo")
    for iterations in ("5", "6"):
        signed_in(people["admin"]).post(reverse("agent_edit", args=[agent.pk]), form_data(agent, max_iterations=iterations))
    agent.refresh_from_db()
    assert "Make current</button>" in signed_in(people["admin"]).get(reverse("agent_versions", args=[agent.pk])).content.decode()
    assert client.get(reverse("agent_versions", args=[agent.pk])).status_code == 302  # sign in first
    for role in ("viewer", "operator"):
        person = signed_in(people[role])
        assert person.get(reverse("agent_versions", args=[agent.pk])).status_code == 200
        assert person.post(reverse("agent_version_make_current", args=[agent.pk, agent.version])).status_code == 403
        assert "Make current</button>" not in person.get(reverse("agent_versions", args=[agent.pk])).content.decode()
    assert signed_in(people["admin"]).get(reverse("agent_version_compare", args=[agent.pk]),
                                          {"a": 999, "b": 1}).status_code == 404
    csrf = Client(enforce_csrf_checks=True)
    csrf.force_login(people["admin"])
    assert csrf.post(reverse("agent_version_make_current", args=[agent.pk, agent.version])).status_code == 403


def test_the_api_lists_drafts_and_makes_a_version_current(people):
    agent = Agent.objects.get(name="demo")
    admin, viewer = api(people["admin"]), api(people["viewer"])
    assert admin.patch(f"/api/v1/agents/{agent.pk}/", {"max_iterations": 9}, format="json").status_code == 200
    agent.refresh_from_db()
    saved = admin.get(f"/api/v1/agents/{agent.pk}/").json()
    assert saved["version"] == agent.version and saved["max_iterations"] == 9
    draft = admin.post(f"/api/v1/agents/{agent.pk}/draft/", {"system_prompt": "Draft prompt"}, format="json")
    assert draft.status_code == 201, draft.content
    body = draft.json()
    assert body["draft"] is True and body["current"] is False and body["changed"] == ["system_prompt"]
    assert viewer.post(f"/api/v1/agents/{agent.pk}/draft/", {"system_prompt": "x"}, format="json").status_code == 403
    assert admin.post(f"/api/v1/agents/{agent.pk}/draft/", {"max_iterations": 0}, format="json").status_code == 400
    listed = viewer.get(f"/api/v1/agents/{agent.pk}/versions/").json()["results"]
    assert [v["number"] for v in listed] == sorted((v["number"] for v in listed), reverse=True)
    assert listed[0]["draft"] is True and listed[1]["current"] is True
    url = f"/api/v1/agents/{agent.pk}/versions/{body['number']}/make-current/"
    assert viewer.post(url).status_code == 403
    made = admin.post(url)
    assert made.status_code == 200 and made.json()["current"] is True
    agent.refresh_from_db()
    assert agent.system_prompt == "Draft prompt" and agent.version == made.json()["number"]
    assert admin.post(f"/api/v1/agents/{agent.pk}/versions/999/make-current/").status_code == 404


def test_a_save_in_the_django_admin_is_a_version_too(demo_data):
    from django.contrib.auth import get_user_model

    root = get_user_model().objects.create_superuser("root_v", "root@example.com", "pw")
    client = Client()
    client.force_login(root)
    agent = Agent.objects.get(name="demo")
    page = client.get(f"/admin/runs/agent/{agent.pk}/change/")
    assert page.status_code == 200
    form = page.context["adminform"].form
    data = {name: value for name, value in form.initial.items() if value is not None and name != "tools"}
    data.update(tools=[t.pk for t in agent.tools.all()], system_prompt="Set in the admin.", model_list="[]",
                provider_options="{}")
    response = client.post(f"/admin/runs/agent/{agent.pk}/change/", data)
    assert response.status_code == 302, response.content.decode()[:2000]
    agent.refresh_from_db()
    version = AgentVersion.objects.get(agent=agent, number=agent.version)
    assert version.settings["system_prompt"] == "Set in the admin." and version.note == "saved in the admin"
    assert version.created_by_name == "root_v"
