"""The demo model's pace: at once for tests, or as a hosted model would answer, for watching."""
import pytest
from django.core.exceptions import ImproperlyConfigured

from hosting.env import env_choice
from runs.demo_model.model import DemoModel

WEATHER = {"model": "demo", "messages": [{"role": "user", "content": "What's the weather in Lagos and London?"}]}


def test_a_realistic_pace_answers_the_example_tasks_in_a_hosted_models_time():
    delays = []
    for city in ("Lagos", "London", "Paris", "Lima", "Oslo", "Rome"):
        body = {"model": "demo", "messages": [{"role": "user", "content": f"What's the weather in {city}?"}]}
        delays.append(DemoModel(pace="realistic").chat(body).delay)
    assert all(0.4 <= d <= 2.5 for d in delays) and len(set(delays)) > 1  # varied, within bounds
    assert DemoModel(pace="realistic").chat(WEATHER).delay == DemoModel(pace="realistic").chat(WEATHER).delay


def test_the_instant_pace_a_latency_set_by_hand_and_scripts_keep_their_own_timing():
    assert DemoModel().chat(WEATHER).delay == 0.0
    assert DemoModel(latency=10, pace="realistic").chat(WEATHER).delay == 10
    model = DemoModel(pace="realistic")
    script = model.create_script([{"content": "done"}], latency=0.0)["model"]
    assert model.chat({"model": script, "messages": [{"role": "user", "content": "x"}]}).delay == 0.0


def test_a_pace_that_is_not_known_stops_the_process_with_the_choices(monkeypatch):
    monkeypatch.setenv("DEMO_MODEL_PACE", "slowish")
    with pytest.raises(ImproperlyConfigured, match="DEMO_MODEL_PACE must be one of instant, realistic"):
        env_choice("DEMO_MODEL_PACE", ("instant", "realistic"), "instant")
    monkeypatch.setenv("DEMO_MODEL_PACE", " Realistic ")
    assert env_choice("DEMO_MODEL_PACE", ("instant", "realistic"), "instant") == "realistic"
