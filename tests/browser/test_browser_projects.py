"""Two teams on one site, in the browser: an operator of project Alpha signs in through the login
page and walks every page the header and Alpha's things lead to (and every link those pages
show, downloads too). Each of Beta's things is named with "beta-secret": that text, and Beta's
name, must be on none of those pages (their HTML, so list filters, form choices and datalists
count), in no message of the approvals socket, and the header's badge counts Alpha's waiting
call only; Alpha's things, named "alpha-visible", are on the pages (so nothing passes because a
page came out empty). Beta's run and approval pages, typed in, answer 404."""
import json
import re
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from evals.models import Dataset
from runs.engine.dispatch import run_dispatch
from runs.lifecycle.runs import run_create
from runs.models import Agent, Approval, ApprovalRule, Budget, Run, Webhook
from tests.browser import PASSWORD, requires_chromium, screenshot
from tests.conftest import wait_for_status
from tests.projects import member, project
from toolsapp.models import McpServer, Tool

pytestmark = [pytest.mark.browser, requires_chromium]

SECRET, VISIBLE = "beta-secret", "alpha-visible"
# Beta's name, as a word (not "beta-secret", which SECRET already catches).
BETA_NAME = re.compile(r"\bBeta\b(?!-)")
TASK_A = "Cancel order ORD-1001 for the alpha-visible team"
TASK_B = "Cancel order ORD-1001 for the beta-secret team"
DESKTOP, PHONE = {"width": 1280, "height": 900}, {"width": 390, "height": 844}
# Links the walk does not follow: signing out, the site admin (staff only), the API and files.
SKIP = re.compile(r"^/(logout|admin|api|static|oidc)/|\.(jsonl|csv|json)$")
MAX_PAGES = 60


def shots(page, name: str) -> None:
    """`name` at desktop width and `name-phone` at phone width; the page is left at desktop width."""
    page.set_viewport_size(DESKTOP)
    screenshot(page, name)
    page.set_viewport_size(PHONE)
    screenshot(page, f"{name}-phone")
    page.set_viewport_size(DESKTOP)


def waiting_run(agent: Agent, task: str) -> Run:
    """A run of `agent`, driven by the live worker until its cancel_order call waits for a person."""
    run = run_create(agent=agent, task=task)
    run_dispatch(run_id=run.pk)
    return wait_for_status(run.pk, Run.Status.AWAITING_APPROVAL)


def two_projects(hooks_port: int) -> dict:
    """Alpha holds the demo agent (renamed) and one of each thing; Beta a copy of each, all named
    with SECRET, and a waiting call of its own."""
    a, b = project("Alpha"), project("Beta")
    demo = Agent.objects.get(name="demo")
    Agent.objects.filter(pk=demo.pk).update(project=a, name=f"{VISIBLE}-bot")
    agents = {"a": Agent.objects.get(pk=demo.pk)}
    copy = Agent.objects.get(pk=demo.pk)
    copy.pk, copy.name, copy.project = None, f"{SECRET}-bot", b
    copy.save()
    copy.tools.set(demo.tools.all())
    agents["b"] = copy
    runs = {"a": waiting_run(agents["a"], TASK_A), "b": waiting_run(agents["b"], TASK_B)}
    # The rest after the runs, so that none of it has a say in them.
    # The demo tools are shared by the site (no project): every project's agents use them and
    # every project's people see them.
    Tool.objects.filter(pk__in=demo.tools.all()).update(project=None)
    weather = Tool.objects.get(name="get_weather")
    things = {}
    for key, prefix, team in (("a", VISIBLE, a), ("b", SECRET, b)):
        tool = Tool.objects.get(pk=weather.pk)
        tool.pk, tool.name, tool.project = None, f"{prefix}-lookup", team
        tool.description = f"The {prefix} team's lookup."
        tool.save()
        agents[key].tools.add(tool)
        things[key] = {
            "tool": tool,
            "mcp": McpServer.objects.create(name=f"{prefix}-mcp", project=team, transport="http",
                                            url=f"https://mcp.example.com/{prefix}"),
            "rule": ApprovalRule.objects.create(name=f"{prefix} rule", project=team,
                                                tool_pattern=f"{prefix}-nothing", action="ask"),
            "budget": Budget.objects.create(name=f"{prefix} budget", project=team, measure="runs", limit=1000),
            "webhook": Webhook.objects.create(url=f"http://127.0.0.1:{hooks_port}/{prefix}", project=team,
                                              description=f"{prefix} receiver"),
            "dataset": Dataset.objects.create(name=f"{prefix}-cases", project=team,
                                              description=f"The {prefix} team's cases."),
        }
    return {"a": a, "b": b, "agents": agents, "runs": runs, "things": things,
            "approvals": {k: Approval.objects.get(run=r, status=Approval.Status.PENDING) for k, r in runs.items()}}


def test_an_operator_of_one_project_sees_nothing_of_another_anywhere(live, browser, demo_data):
    teams = two_projects(live.hooks.port)
    ann = member("ann", teams["a"], "operators", password=PASSWORD)
    a_run, b_run = teams["runs"]["a"], teams["runs"]["b"]
    a_approval, b_approval = teams["approvals"]["a"], teams["approvals"]["b"]
    a_things = teams["things"]["a"]

    page = browser.login(ann)
    # Every message of the approvals socket the pages open from here on.
    frames: list[str] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(str(payload))))

    problems: list[str] = []
    seen: dict[str, int] = {}
    links: dict[str, list[str]] = {}  # the links of each page seen

    def check(url: str, *present: str, linked_from: str = "") -> None:
        """Open `url`; nothing of Beta on it, the badge counts Alpha's call, `present` is there."""
        response = page.goto(url)
        status = response.status if response else 0
        seen[url] = status
        if status != 200:
            problems.append(f"{url}: answered {status}" + (f" (a link of {linked_from})" if linked_from else ""))
            return
        html = page.content()
        for text in (SECRET, SECRET.replace("-", "_")):
            for found in re.finditer(re.escape(text), html, re.IGNORECASE):
                problems.append(f"{url}: {html[max(0, found.start() - 120):found.end() + 80]!r}")
        for found in BETA_NAME.finditer(html):
            problems.append(f"{url}: Beta's name: {html[max(0, found.start() - 120):found.end() + 80]!r}")
        body = page.locator("body")
        for text in present:
            expect(body).to_contain_text(text)
        expect(page.locator("#approval-badge")).to_have_text("1")
        links[url] = page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")

    # The header's pages, then Alpha's things, each with what of Alpha it must show.
    check("/", VISIBLE)
    check("/runs/", TASK_A, f"{VISIBLE}-bot")
    check(f"/runs/{a_run.pk}/", TASK_A, f"{VISIBLE}-bot")
    check("/runs/new/")
    expect(page.locator("#id_agent option", has_text=f"{VISIBLE}-bot")).to_have_count(1)
    check("/approvals/", TASK_A)
    expect(page.locator("#approval-list .approval[data-approval-id]")).to_have_count(1)
    expect(page.locator(f"#approval-list .approval[data-approval-id='{a_approval.pk}']")).to_be_visible()
    check(f"/approvals/{a_approval.pk}/", "ORD-1001")
    check("/metrics/", f"{VISIBLE}-bot")
    check("/projects/", "Alpha", "operator")
    check("/agents/", f"{VISIBLE}-bot")
    check(f"/agents/{teams['agents']['a'].pk}/", f"{VISIBLE}-bot", f"{VISIBLE}-lookup")
    check("/datasets/", f"{VISIBLE}-cases")
    check(f"/datasets/{a_things['dataset'].pk}/", f"{VISIBLE}-cases")
    check("/rules/", f"{VISIBLE} rule")
    check("/budgets/", f"{VISIBLE} budget")
    check("/tools/", f"{VISIBLE}-lookup", "get_weather")
    check(f"/tools/{a_things['tool'].pk}/", f"{VISIBLE}-lookup")
    check("/tools/mcp/", f"{VISIBLE}-mcp")  # a server's own page is for admins: no link to it here
    check("/settings/you/")
    # An operator has no webhooks page (admins have): the header has no link to it.
    expect(page.locator("#nav-webhooks")).to_have_count(0)
    expect(page.locator("#nav-projects")).to_have_text("Projects")

    # The projects page: Alpha with the person's role, and no Beta.
    page.goto("/projects/")
    alpha = page.locator("#project-alpha")
    expect(alpha.locator("h2")).to_contain_text("Alpha")
    expect(alpha).to_contain_text("Your role: operator")
    expect(page.locator("#project-beta")).to_have_count(0)
    expect(page.locator("main section.card")).to_have_count(1)

    # Every other link those pages show, and the ones they lead to (downloads fetched).
    origin = urlsplit(page.url)
    queue = list(links)
    downloads: set[str] = set()
    while queue and len(seen) < MAX_PAGES:
        source = queue.pop(0)
        for href in links.get(source, []):
            parts = urlsplit(href)
            if (parts.scheme, parts.netloc) != (origin.scheme, origin.netloc):
                continue
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            if re.search(r"\.(jsonl|csv|json)$", parts.path):
                downloads.add(target)
            elif not SKIP.search(parts.path) and target not in seen:
                check(target, linked_from=source)
                queue.append(target)
    for url in sorted(downloads):
        response = page.request.get(url)
        seen[url] = response.status
        text = response.text()
        if response.status != 200:
            problems.append(f"{url}: answered {response.status}")
        elif SECRET in text.lower():
            problems.append(f"{url}: the download names {SECRET}")
    print("walked:", json.dumps(seen, indent=1))

    # Beta's run and approval, typed in: the 404 page, with nothing of them.
    for url in (f"/runs/{b_run.pk}/", f"/approvals/{b_approval.pk}/", f"/agents/{teams['agents']['b'].pk}/"):
        response = page.goto(url)
        assert response.status == 404, url
        expect(page.locator("body")).to_contain_text("Not Found")
        assert SECRET not in page.content().lower()

    # The pictures, as the operator: her projects, her queue, her runs.
    for url, name in (("/projects/", "projects-operator"), ("/approvals/", "projects-approvals-operator"),
                      ("/runs/", "projects-runs-operator")):
        page.goto(url)
        expect(page.locator("#approval-badge")).to_have_text("1")
        shots(page, name)

    # Live: a new waiting call of Beta changes nothing on her queue; one of Alpha arrives.
    page.goto("/approvals/")
    expect(page.locator("#approval-live-status")).to_have_text("Live updates: on.")
    b_second = waiting_run(teams["agents"]["b"], TASK_B + " (again)")
    a_second = waiting_run(teams["agents"]["a"], TASK_A + " (again)")
    expect(page.locator(f"#approval-list .approval[data-run-id='{a_second.pk}']")).to_be_visible()
    expect(page.locator("#approval-badge")).to_have_text("2")
    expect(page.locator("#approval-list .approval[data-approval-id]")).to_have_count(2)
    assert SECRET not in page.content().lower()
    messages = [json.loads(frame) for frame in frames if frame.startswith("{")]
    told = {m.get("run_id") for m in messages}
    assert a_second.pk in told, messages
    assert not told & {b_run.pk, b_second.pk}, messages
    assert all(m.get("pending", 0) <= 2 for m in messages), messages
    assert not [frame for frame in frames if SECRET in frame.lower()]

    assert not problems, "\n".join(problems)


def test_a_project_admin_adds_a_person_and_maps_their_chat_identity_on_the_projects_page(live, browser, demo_data):
    """What the admin used to be needed for, on the projects page: Alpha's admin adds a person with a
    role and maps their Slack member ID; a name that is no account is refused in the card; the
    page reads at desktop and phone width (nothing wider than the phone)."""
    alpha, beta = project("Alpha"), project("Beta")
    ada = member("ada", alpha, "admins", password=PASSWORD)
    member("bea", beta, "admins")
    User.objects.create_user("dan", password=PASSWORD)

    page = browser.login(ada)
    page.goto("/projects/")
    card = page.locator("#project-alpha")
    expect(page.locator("#project-beta")).to_have_count(0)
    adding = card.get_by_role("form", name="Add a person to Alpha")
    adding.get_by_label("Person (their username)").fill("nobody")
    adding.get_by_role("button", name="Add").click()
    expect(card.locator(".card-answer.msg-error")).to_contain_text("No account is named “nobody”")

    adding = card.get_by_role("form", name="Add a person to Alpha")
    adding.get_by_label("Person (their username)").fill("dan")
    adding.get_by_label("Role").select_option(label="operator")
    adding.get_by_role("button", name="Add").click()
    expect(card.locator(".card-answer.msg-success")).to_have_text("dan is now operator in Alpha.")
    expect(card.get_by_label("Role of dan")).to_have_value("operators")

    mapping = card.get_by_role("form", name="Map a chat identity in Alpha")
    mapping.get_by_label("Slack member ID").fill("U024BE7LH")
    mapping.get_by_label("Acts as").select_option("dan")
    mapping.get_by_role("button", name="Map").click()
    expect(card.locator(".card-answer.msg-success")).to_have_text("U024BE7LH now acts as dan in chat.")
    expect(card.get_by_role("list", name="Chat identities of Alpha")).to_contain_text("U024BE7LH → dan")

    shots(page, "projects-admin")
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.set_viewport_size(DESKTOP)
