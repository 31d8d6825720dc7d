"""What a tool does in an experiment can be set wherever tools are edited (the form, the admin,
the API and its schema) and it decides the calls: "never" simulates even a tool that only reads,
"real" runs a tool that writes; a form that does not send it keeps what the tool has."""
import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from evals.datasets import case_add, dataset_create
from evals.experiments import experiment_start
from runs.models import Agent, ToolCall
from tests.support.approval_fixtures import make_user
from tests.tools.test_tool_services import form_post
from tests.web.api.test_api import api
from toolsapp.models import Ticket, Tool


@pytest.fixture
def ada(demo_data, client):
    client.force_login(make_user("ada", "admins"))
    return client


def mode(name: str) -> str:
    return Tool.objects.get(name=name).in_experiments


def test_the_form_the_admin_and_the_api_set_it(ada, demo_data, client):
    weather = Tool.objects.get(name="get_weather")
    post = form_post(name="get_weather", handler="get_weather", in_experiments="never")
    assert ada.post(reverse("tool_edit", args=[weather.pk]), post).status_code == 302
    assert mode("get_weather") == "never"
    assert "Never runs in experiments" in ada.get(reverse("tool_detail", args=[weather.pk])).content.decode()
    unsent = form_post(name="get_weather", handler="get_weather")
    assert ada.post(reverse("tool_edit", args=[weather.pk]), unsent).status_code == 302
    assert mode("get_weather") == "never"  # not sent: kept

    root = User.objects.create_superuser("root", password="pw-root-long-enough")
    client.force_login(root)
    ticket = Tool.objects.get(name="create_ticket")
    post = form_post(name="create_ticket", handler="create_ticket", in_experiments="real")
    assert client.post(reverse("admin:toolsapp_tool_change", args=[ticket.pk]), post).status_code == 302
    assert mode("create_ticket") == "real"

    admin_api = api(make_user("adam", "admins"))
    changed = admin_api.patch(f"/api/v1/tools/{ticket.pk}/", {"in_experiments": "auto"}, format="json")
    assert changed.status_code == 200 and changed.json()["in_experiments"] == "auto"
    refused = admin_api.patch(f"/api/v1/tools/{ticket.pk}/", {"in_experiments": "sometimes"}, format="json")
    assert refused.status_code == 400 and "in_experiments" in refused.json()["errors"]
    schema = admin_api.get("/api/schema/?format=json").json()
    assert "in_experiments" in str(schema["components"]["schemas"])


def test_it_decides_what_runs(drive, demo_data):
    Tool.objects.filter(name="get_weather").update(in_experiments="never")
    Tool.objects.filter(name="create_ticket").update(in_experiments="real")
    dataset = dataset_create(name="flags")
    case_add(dataset=dataset, data={"task": "What's the weather in Lagos and London?"})
    case_add(dataset=dataset, data={"task": "Create a ticket about the printer", "customer": "acme"})
    tickets = Ticket.objects.count()
    experiment = drive(experiment_start(dataset=dataset, agent=Agent.objects.get(name="demo")))
    weather_calls = ToolCall.objects.filter(run__case_result__experiment=experiment, tool_name="get_weather")
    assert weather_calls.count() == 2 and {c.status for c in weather_calls} == {ToolCall.Status.SIMULATED}
    created = ToolCall.objects.get(run__case_result__experiment=experiment, tool_name="create_ticket")
    assert created.status == ToolCall.Status.SUCCEEDED and Ticket.objects.count() == tickets + 1
    # By default, a tool that writes is simulated: the same case creates nothing.
    Tool.objects.filter(name="create_ticket").update(in_experiments="auto")
    again = drive(experiment_start(dataset=dataset, agent=Agent.objects.get(name="demo")))
    call = ToolCall.objects.get(run__case_result__experiment=again, tool_name="create_ticket")
    assert call.status == ToolCall.Status.SIMULATED and Ticket.objects.count() == tickets + 1


def test_a_change_of_the_setting_reaches_runs_already_going(demo_data):
    from runs.engine.tools.run_tools import RunTools

    Tool.objects.filter(name="create_ticket").update(in_experiments="real")
    toolbox = RunTools(["create_ticket", "get_weather"], experiment=True)
    assert not toolbox.facts["create_ticket"].simulated and not toolbox.facts["get_weather"].simulated
    Tool.objects.filter(name="create_ticket").update(in_experiments="never")
    Tool.objects.filter(name="get_weather").update(handler="create_ticket")  # now a handler that writes
    toolbox.refresh(["create_ticket", "get_weather"])
    assert toolbox.facts["create_ticket"].simulated and toolbox.facts["get_weather"].simulated


def test_a_destructive_tool_never_runs_for_real_in_an_experiment(ada, demo_data):
    cancel = Tool.objects.get(name="cancel_order")
    post = form_post(name="cancel_order", handler="cancel_order", destructive="on", in_experiments="real")
    answer = ada.post(reverse("tool_edit", args=[cancel.pk]), post)
    assert answer.status_code == 200 and "A destructive tool never runs in experiments" in answer.content.decode()
    assert mode("cancel_order") == "auto"
    from runs.engine.tools.run_tools import RunTools

    Tool.objects.filter(name="cancel_order").update(in_experiments="real")  # set before it was made destructive
    assert RunTools(["cancel_order"], experiment=True).facts["cancel_order"].simulated
