"""A second team sets itself up without Django's admin (issue 49), in Chromium at desktop and phone
width, light and dark: a site administrator makes project Billing with bill as its admin; bill
adds cy as an operator, adds and removes dan, and sees who has which role; cy's Launch page says
Billing has no agents yet and who can add one (not an empty list); bill copies the demo agent
from another project he belongs to; cy then launches a run in Billing with it. The header names
the project each person works in and switches it; the new budget form starts with it."""
import re

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from projects.models import Membership, Project
from runs.models import Agent, Run
from tests.browser import PASSWORD, WEATHER, assert_no_violations, axe_violations, requires_chromium, screenshot
from tests.projects import member, project

pytestmark = [pytest.mark.browser, requires_chromium]

DESKTOP, PHONE = {"width": 1280, "height": 800}, {"width": 390, "height": 844}
LOOKS = [(scheme, width, size) for scheme in ("light", "dark") for width, size in (("desktop", DESKTOP), ("phone", PHONE))]
NO_AGENTS = "Billing has no agents yet: an admin of Billing (bill) can add one."


def look_everywhere(page, name: str, found: dict) -> None:
    """Axe and a screenshot in each scheme at each width; at phone width nothing scrolls sideways."""
    for scheme, width, size in LOOKS:
        page.emulate_media(color_scheme=scheme)
        page.set_viewport_size(size)
        found[f"{name} ({scheme}, {width})"] = axe_violations(page)
        if size is PHONE:
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= PHONE["width"], f"{name} ({scheme}) is {wide} px wide on a phone"
        screenshot(page, f"projects-{name}-{scheme}-{width}")
    page.emulate_media(color_scheme="light")
    page.set_viewport_size(DESKTOP)


def person(name: str) -> User:
    return User.objects.create_user(name, password=PASSWORD)


def header_project(page):
    """The header's project: the switch's chosen option, or the one project named."""
    switch = page.locator("#project-switch-select")
    return switch.locator("option:checked") if switch.count() else page.locator("#project-current strong")


def test_a_second_team_sets_itself_up_and_launches(live, browser, users):
    found: dict[str, list[str]] = {}
    bill, cy, dan = person("bill"), person("cy"), person("dan")
    member("bill", Project.objects.get(slug="default"), "operators")  # where the demo agent is

    # A site administrator makes the project, with bill as its first admin.
    root = browser.login(users["admin"])
    root.goto("/projects/")
    root.locator("#project-new summary").click()
    form = root.get_by_role("form", name="New project")
    form.get_by_label("Name", exact=True).fill("Billing")
    form.get_by_label("What the team does with it").fill("Refunds and invoices")
    form.get_by_label("Its first admin (their username)").fill("bill")
    look_everywhere(root, "new-project", found)
    form.get_by_role("button", name="Make the project").click()
    card = root.get_by_role("region", name="Project Billing")
    expect(card).to_contain_text("Billing is made; bill is its admin and adds its people here.")
    billing = Project.objects.get(slug="billing")
    assert Membership.objects.get(project=billing, user=bill).role.name == "admins"

    # bill adds cy (operator) and dan (viewer), sees their roles, and removes dan.
    page = browser.login(bill)
    expect(header_project(page)).to_have_text("Billing")  # the first of his projects, by name
    page.goto("/projects/")
    card = page.get_by_role("region", name="Project Billing")
    add = card.get_by_role("form", name="Add a person to Billing")
    for name, role in (("cy", "operator"), ("dan", "viewer")):
        add.get_by_label("Person (their username)").fill(name)
        add.get_by_label("Role").select_option(label=role)
        add.get_by_role("button", name="Add").click()
        card = page.get_by_role("region", name="Project Billing")
        expect(card.locator(".card-answer")).to_have_text(f"{name} is now {role} in Billing.")
        add = card.get_by_role("form", name="Add a person to Billing")
    people = card.get_by_role("list", name="People of Billing")
    expect(people.get_by_label("Role of cy")).to_have_value("operators")
    expect(people.get_by_label("Role of dan")).to_have_value("viewers")
    expect(people.get_by_label("Role of bill")).to_have_value("admins")
    look_everywhere(page, "people", found)
    people.get_by_role("button", name="Remove dan").click()
    card = page.get_by_role("region", name="Project Billing")
    expect(card.locator(".card-answer")).to_have_text("dan no longer has a role in Billing.")
    expect(card.get_by_role("list", name="People of Billing")).not_to_contain_text("dan")
    assert not Membership.objects.filter(user=dan).exists()

    # cy's Launch page: no empty list, but what is missing and who can add it.
    launcher = browser.login(cy)
    expect(header_project(launcher)).to_have_text("Billing")
    launcher.goto("/runs/new/")
    expect(launcher.locator("#agents-nothing-yet")).to_have_text(NO_AGENTS)
    expect(launcher.locator("#launch-button")).to_be_disabled()
    look_everywhere(launcher, "launch-no-agents", found)

    # bill copies the demo agent from Default, where he is an operator, into Billing.
    page.goto("/projects/")
    page.get_by_role("link", name="Copy an agent or a tool into Billing").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Copy an agent or a tool into Billing")
    look_everywhere(page, "copy", found)
    page.get_by_role("button", name="Copy into Billing: agent demo").click()
    expect(page.locator(".messages")).to_contain_text("demo (copy in Billing) is now an agent of Billing, a copy of demo.")
    copied = Agent.objects.get(name="demo (copy in Billing)")
    assert copied.project == billing and Agent.objects.get(name="demo").project.slug == "default"

    # cy launches a run in Billing with it.
    launcher.reload()
    expect(launcher.locator("#agents-nothing-yet")).to_have_count(0)
    expect(launcher.locator("#id_agent")).to_have_value(str(copied.pk))
    look_everywhere(launcher, "launch-with-agent", found)
    launcher.get_by_label("Task").fill(WEATHER)
    launcher.locator("#launch-button").click()
    expect(launcher).to_have_url(re.compile(r"/runs/\d+/$"))
    expect(launcher.locator("#run-status")).to_have_attribute("data-status", Run.Status.SUCCEEDED)
    run = Run.objects.latest("pk")
    assert (run.agent_id, run.created_by) == (copied.pk, cy)
    assert_no_violations(found)


def test_the_header_names_the_current_project_and_switches_it(live, browser, users):
    found: dict[str, list[str]] = {}
    project("Billing")
    page = browser.login(users["admin"])
    switch = page.locator("#project-switch-select")
    expect(switch.locator("option:checked")).to_have_text("Default")  # the site's Default, for the platform team
    look_everywhere(page, "header-switch", found)
    page.goto("/budgets/new/")
    expect(page.locator("#id_project option:checked")).to_have_text("Default")

    switch.select_option(label="Billing")
    page.get_by_role("button", name="Switch").click()
    expect(page).to_have_url(re.compile(r"/budgets/new/$"))  # back where the switch was made
    expect(page.locator(".messages")).to_contain_text("You now work in Billing")
    expect(page.locator("#project-switch-select option:checked")).to_have_text("Billing")
    expect(page.locator("#id_project option:checked")).to_have_text("Billing")
    expect(page.locator("#field-agent")).to_contain_text("Billing has no agents yet: you may add one.")
    look_everywhere(page, "budget-current-project", found)

    # At phone width the switch sits in the folded menu.
    page.set_viewport_size(PHONE)
    expect(page.locator("#project-switch")).to_be_hidden()
    page.get_by_role("button", name="Menu").click()
    expect(page.locator("#project-switch-select option:checked")).to_have_text("Billing")
    screenshot(page, "projects-header-switch-phone-open")
    assert_no_violations(found)
