"""agent_save and agent_errors: the one write path of agents, under the dashboard's editor and the API."""
import pytest

from runs.lifecycle.agents import InvalidAgent, agent_errors, agent_save
from runs.models import Agent
from toolsapp.models import Tool


def test_a_new_agent_gets_its_settings_tools_and_defaults(demo_data):
    tools = list(Tool.objects.filter(name__in=["get_weather", "lookup_order"]))
    agent = agent_save(agent=None, data={"name": "billing", "model_list": ["gpt-a"], "tools": tools, "max_iterations": 4})
    agent.refresh_from_db()
    assert (agent.name, agent.model_list, agent.max_iterations) == ("billing", ["gpt-a"], 4)
    assert sorted(agent.tools.values_list("name", flat=True)) == ["get_weather", "lookup_order"]
    assert agent.repeat_limit == Agent._meta.get_field("repeat_limit").default


def test_a_change_touches_only_the_given_settings(demo_data):
    agent = Agent.objects.get(name="demo")
    tools = sorted(agent.tools.values_list("name", flat=True))
    agent_save(agent=agent, data={"max_cost_usd": 0.25})
    agent.refresh_from_db()
    assert agent.max_cost_usd == 0.25 and sorted(agent.tools.values_list("name", flat=True)) == tools


def test_every_broken_rule_is_reported_by_field_and_nothing_is_saved(demo_data):
    data = {"name": "demo", "max_iterations": 0, "provider_options": {"k": "\x00"}, "verifier": "nope",
            "daily_cost_alert_usd": float("inf"), "model_list": [""]}
    errors = agent_errors(agent=None, data=data)
    assert set(errors) == {"name", "max_iterations", "provider_options", "verifier", "daily_cost_alert_usd",
                           "model_list"}
    with pytest.raises(InvalidAgent) as info:
        agent_save(agent=None, data=data)
    assert info.value.errors == errors
    assert Agent.objects.filter(name="demo").count() == 1


def test_a_new_agent_needs_a_name_and_an_agent_may_keep_its_own(demo_data):
    assert "name" in agent_errors(agent=None, data={})
    demo = Agent.objects.get(name="demo")
    assert agent_errors(agent=demo, data={"name": "demo"}) == {}


def test_checking_an_agent_changes_nothing_on_it(demo_data):
    demo = Agent.objects.get(name="demo")
    before = demo.max_iterations
    assert agent_errors(agent=demo, data={"max_iterations": before + 1}) == {}
    assert demo.max_iterations == before


def test_unknown_settings_are_a_programming_error(demo_data):
    with pytest.raises(TypeError):
        agent_errors(agent=None, data={"name": "x", "colour": "red"})
