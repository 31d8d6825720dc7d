"""Versions of an agent in the browser: an admin saves a draft, compares it with the current
version, and makes it current; a viewer reads the versions but changes nothing."""
import pytest
from playwright.sync_api import expect

from runs.models import Agent, AgentVersion
from tests.browser import axe_violations, requires_chromium, screenshot

pytestmark = [pytest.mark.browser, requires_chromium]


def test_admin_saves_a_draft_compares_it_and_makes_it_current(live, browser, users):
    agent = Agent.objects.get(name="demo")
    page = browser.login(users["admin"])
    page.goto(f"/agents/{agent.pk}/edit/")
    first = agent.version + 1  # the settings as they are, saved once more
    page.locator("#agent-save").click()
    expect(page.locator(".messages")).to_contain_text(f"saved as version {first}")
    expect(page.locator("#agent-versions")).to_be_visible()

    page.goto(f"/agents/{agent.pk}/edit/")
    page.locator("#id_system_prompt").fill("You are a careful assistant.\nAlways give the order number.")
    page.locator("#id_max_iterations").fill("6")
    page.locator("#agent-save-draft").click()
    expect(page.locator(".messages")).to_contain_text(f"Draft version {first + 1} of demo saved")
    draft = page.locator(f"#version-{first + 1}")
    expect(draft.locator(".version-badge")).to_have_text("draft")
    expect(draft.locator(".version-changed")).to_contain_text("system prompt, max iterations")
    expect(page.locator(f"#version-{first} .version-badge")).to_have_text("current")
    assert Agent.objects.get(pk=agent.pk).max_iterations == agent.max_iterations  # nothing changed yet
    for width, name in ((1280, "agent-versions-desktop"), (390, "agent-versions-phone")):
        page.set_viewport_size({"width": width, "height": 900})
        # The visible "Make current" is part of each button's name (label-content-name-mismatch).
        assert axe_violations(page) == []
        screenshot(page, name)
    page.set_viewport_size({"width": 1280, "height": 900})

    draft.get_by_role("link", name="Compare with the current version").click()
    expect(page.locator("#version-compare-summary")).to_have_text("2 settings differ.")
    expect(page.locator("#difference-system_prompt .added").last).to_have_text("+Always give the order number.")
    expect(page.locator("#difference-system_prompt .removed")).to_have_text("-" + agent.system_prompt)
    expect(page.locator("#difference-max_iterations")).to_contain_text("6")
    for width, name in ((1280, "agent-version-compare-desktop"), (390, "agent-version-compare-phone")):
        page.set_viewport_size({"width": width, "height": 900})
        screenshot(page, name)
    page.set_viewport_size({"width": 1280, "height": 900})

    page.goto(f"/agents/{agent.pk}/versions/")
    page.get_by_role("button", name=f"Make current: version {first + 1}").click()
    expect(page.locator(".messages")).to_contain_text(f"Draft version {first + 1} is now current, as version {first + 2}.")
    expect(page.locator(f"#version-{first + 2} .version-badge")).to_have_text("current")
    agent.refresh_from_db()
    assert agent.max_iterations == 6 and agent.version == first + 2
    assert AgentVersion.objects.get(agent=agent, number=first + 2).note == f"made current from version {first + 1}"

    viewer = browser.login(users["viewer"])
    viewer.goto(f"/agents/{agent.pk}/versions/")
    expect(viewer.locator(f"#version-{first + 1}")).to_be_visible()
    expect(viewer.get_by_role("button", name=f"Make current: version {first}")).to_have_count(0)
