"""An agent's memories in the browser: an admin opens them from the agent's page, searches,
corrects a fact and deletes one, at desktop and at phone width."""
import pytest
from playwright.sync_api import expect

from memory.models import Memory
from runs.models import Agent, Approval, Run
from runs.supervision.approvals.decide import approval_decide
from tests.browser import assert_no_violations, axe_violations, requires_chromium, screenshot
from tests.conftest import wait_for_status
from toolsapp.models import Tool

pytestmark = [pytest.mark.browser, requires_chromium]

DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}
INVOICES = "Acme wants every invoice sent to billing@acme.test, never to the person who ordered"


def remembered(launch, script, operator, *, customer: str, text: str) -> Run:
    """A run of agent memo that saved `text` for `customer`, approved by `operator`."""
    model = script({"tool_calls": [{"id": "s1", "name": "save_memory", "arguments": {"text": text}}]}, {"content": "Noted."})
    run = launch("Remember this for later", agent="memo", models=[model], customer=customer)
    approval_decide(approval_id=Approval.objects.get(run=run).pk, user=operator, approve=True)
    return wait_for_status(run.pk, "succeeded")  # the decision hands the run to the live worker


def fits_a_phone(page, found: dict, name: str) -> None:
    page.set_viewport_size(PHONE)
    found[f"{name} at phone width"] = axe_violations(page)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{name} is {width} px wide at phone width"
    screenshot(page, f"memories-{name}-phone")
    page.set_viewport_size(DESKTOP)


def test_an_admin_searches_corrects_and_deletes_an_agents_memories(live, browser, users, launch, script):
    agent = Agent.objects.create(name="memo", summarize_on_stop=False, description="Remembers customers' habits.")
    agent.tools.set(Tool.objects.filter(name__in=["save_memory", "search_memory", "get_weather"]))
    first = remembered(launch, script, users["operator"], customer="acme", text=INVOICES)
    remembered(launch, script, users["operator"], customer="acme", text="Acme ships by rail, never by air")
    remembered(launch, script, users["operator"], customer="globex", text="Globex is closed on Fridays")
    reader = launch("Where do Acme's invoices go?", agent="memo", customer="acme", models=[script(
        {"tool_calls": [{"id": "f1", "name": "search_memory", "arguments": {"query": "invoice"}}]}, {"content": "To billing."})])
    assert reader.status == Run.Status.SUCCEEDED

    page = browser.login(users["admin"])
    found = {}
    page.goto(f"/agents/{agent.pk}/")
    page.locator("#agent-memories").click()
    expect(page.locator("h1")).to_have_text("Memories of agent memo")
    expect(page.locator("#memory-state")).to_contain_text("Memory is on")
    facts = page.locator("#memory-facts .fact")
    expect(facts).to_have_count(3)
    invoices = facts.filter(has_text="billing@acme.test")
    expect(invoices.locator(".fact-source")).to_contain_text(f"run #{first.pk}, step 1, approved by operator")
    expect(invoices.locator(".fact-readers a")).to_have_text(f"run #{reader.pk}")
    found["list at desktop width"] = axe_violations(page)
    screenshot(page, "memories-list-desktop")
    fits_a_phone(page, found, "list")

    page.get_by_label("Search").fill("invoice")
    page.locator("#memory-search-button").click()
    expect(facts).to_have_count(1)
    expect(facts.first).to_contain_text(INVOICES)
    expect(page.locator("#memory-count")).to_contain_text("1 fact matches “invoice”")
    screenshot(page, "memories-search-desktop")
    page.get_by_label("Customer").select_option(label="globex")
    page.get_by_label("Search").fill("")
    page.locator("#memory-search-button").click()
    expect(facts).to_have_count(1)
    expect(facts.first).to_contain_text("Globex is closed on Fridays")
    page.locator("#memory-search-clear").click()
    expect(facts).to_have_count(3)

    facts.filter(has_text="ships by rail").locator(".fact-edit").click()
    expect(page.locator("h1")).to_contain_text("Edit fact #")
    text = page.get_by_label("Fact")
    expect(text).to_have_value("Acme ships by rail, never by air")
    fits_a_phone(page, found, "edit")
    text.fill("ab")
    page.locator("#memory-save").click()
    expect(page.locator("#field-text .errorlist")).to_contain_text("at least 3 characters")
    page.get_by_label("Fact").fill("Acme ships by sea since May")
    page.locator("#memory-save").click()
    expect(page.locator(".messages")).to_contain_text("saved")
    edited = facts.filter(has_text="Acme ships by sea since May")
    expect(edited.locator(".fact-edited")).to_contain_text("by admin")
    screenshot(page, "memories-edited-desktop")

    facts.filter(has_text="Globex").locator(".fact-delete").click()
    expect(page.locator("h1")).to_contain_text("Delete fact #")
    expect(page.locator("#memory-delete-form")).to_contain_text("Globex is closed on Fridays")
    found["delete at desktop width"] = axe_violations(page)
    fits_a_phone(page, found, "delete")
    page.locator("#memory-delete-confirm").click()
    expect(page.locator(".messages")).to_contain_text("deleted")
    expect(facts).to_have_count(2)
    expect(facts.filter(has_text="Globex")).to_have_count(0)
    assert sorted(Memory.objects.values_list("text", flat=True)) == ["Acme ships by sea since May", INVOICES]
    assert_no_violations(found)
