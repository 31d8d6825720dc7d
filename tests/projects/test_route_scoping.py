"""Every route that names a thing is scoped to the thing's project (projects/routes.py).

The URL configuration is walked whole: a route with an argument is either registered in
OBJECT_ROUTES (with a resolver giving its things' projects) or in PERSONAL_ROUTES, so a new
endpoint cannot forget its project. Then every route of OBJECT_ROUTES is asked, with arguments
naming real things of project Beta, by people whose only role is in project Alpha (an operator, an
admin; signed in, and over the API also with a token of theirs): 404 for GET and POST, as if the
thing did not exist; so does a site admin's token limited to Alpha. A person of Beta (and a site
admin, in the "admins" group) gets anything but 404 for the same URLs, which proves the arguments
name real things. A route naming two things (a memory of an agent...) is asked with one of them
Beta's under the other of Alpha's too."""
from types import SimpleNamespace

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.test import APIClient

from accounts.models import ApiToken
from accounts.services import api_token_create
from evals import datasets as data
from evals.experiments import experiment_start
from evals.models import Dataset
from memory.models import Memory
from projects.routes import OBJECT_ROUTES, PERSONAL_ROUTES
from runs.controls.levers import DECLARED as DECLARED_LEVERS
from runs.lifecycle.agents import agent_save
from runs.lifecycle.forks import run_fork
from runs.models import Agent, ApprovalRule, Budget, RunGrant, Webhook
from tests.projects import member, project
from tests.support.approval_fixtures import make_user, pending_approval
from toolsapp.models import McpServer, Tool

EXTEND = ("tests/projects/test_route_scoping.py does not know how to name a thing of project Beta for "
          "these routes: extend ROUTE_THING (and, for a new argument, ARGUMENT) there")


# --- (a) Every route with an argument says which project it is about ------------------------------


def routes_with_arguments() -> dict[str, list[str]]:
    """{route name (or its pattern, when it has none): its arguments} of every route of the URL
    configuration that captures something, includes followed, Django's admin left out."""
    found: dict[str, list[str]] = {}

    def walk(patterns, prefix: str, regexes: tuple) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                if pattern.app_name == "admin" or route.startswith("admin/"):
                    continue
                walk(pattern.url_patterns, route, (*regexes, pattern.pattern.regex))
            elif isinstance(pattern, URLPattern):
                chain = (*regexes, pattern.pattern.regex)
                if any(regex.groups for regex in chain):
                    names = [name for regex in chain for name in regex.groupindex]
                    found[pattern.name or f"<unnamed route {route}>"] = names or ["<positional>"]

    walk(get_resolver().url_patterns, "", ())
    return found


def test_every_route_with_an_argument_is_scoped_to_a_project_or_personal():
    routes = routes_with_arguments()
    # The walk finds what it should (a walk that found nothing would let everything pass).
    assert {"run_detail", "api-run-detail", "api-agent-make-current", "memory_edit", "case_compare",
            "api-token-revoke"} <= set(routes)
    assert "app_list" not in routes and "view_on_site" not in routes  # Django's admin is left out
    unscoped = sorted(name for name in routes if name not in OBJECT_ROUTES and name not in PERSONAL_ROUTES)
    assert not unscoped, (
        "These routes take an argument but say nothing about its project: register a resolver for each "
        "(projects/routes.py: an app's project_routes.py), or, if the argument is the person's own, add it "
        "to PERSONAL_ROUTES:\n" + "\n".join(f"  {name} {routes[name]}" for name in unscoped))


def test_every_registered_route_exists():
    """A misspelt registration leaves the real route unscoped: every name registered is a route."""
    routes = routes_with_arguments()
    stale = sorted((set(OBJECT_ROUTES) | PERSONAL_ROUTES) - set(routes))
    assert not stale, f"Registered in projects/routes.py but no route with arguments has the name: {stale}"


# --- (b), (c) Beta's things, asked for by people of Alpha -----------------------------------------

# Which of Beta's things each route's `pk` names (a route without `pk` names it by another argument).
ROUTE_THING = {
    **dict.fromkeys([
        "run_detail", "run_cancel", "run_rerun", "call_result", "call_arguments", "run_fork", "step_replay",
        "run_add_to_dataset", "api-run-detail", "api-run-cancel", "api-run-rerun", "api-run-grants", "api-run-fork",
        "api-step-replay",
        # Every lever's page and API routes (run_pause, api-run-pause...) name the run it steers.
        *(route for lever in DECLARED_LEVERS for route in (lever.page_route, lever.api_route)),
    ], "run"),
    **dict.fromkeys(["run_compare", "api-run-compare"], "fork"),  # a fork: a run with a parent to compare with
    **dict.fromkeys(["approval_decide", "approval_detail", "api-approval-approve", "api-approval-reject"], "approval"),
    **dict.fromkeys(["grant_revoke", "api-grant-revoke"], "grant"),
    **dict.fromkeys([
        "agent_detail", "agent_edit", "agent_versions", "agent_version_compare", "agent_version_make_current",
        "api-agent-detail", "api-agent-draft", "api-agent-make-current", "api-agent-versions", "agent_memories",
    ], "agent"),
    **dict.fromkeys(["memory_edit", "memory_delete"], "memory"),
    **dict.fromkeys(["rule_edit", "rule_delete", "rule_shadow", "api-rule-detail", "api-rule-shadow",
                     "api-rule-versions"], "rule"),
    **dict.fromkeys(["budget_edit", "budget_delete", "budget_raise", "api-budget-detail", "api-budget-raise"],
                    "budget"),
    **dict.fromkeys(["webhook_test", "webhook_delete", "webhook_switch"], "webhook"),
    **dict.fromkeys(["tool_detail", "tool_edit", "api-tool-detail"], "tool"),
    **dict.fromkeys(["mcp_server_detail", "mcp_server_edit", "mcp_server_delete", "mcp_server_discover"], "server"),
    **dict.fromkeys(["dataset_detail", "dataset_import", "dataset_export", "dataset_delete", "api-dataset-detail",
                     "api-dataset-export", "api-dataset-import", "api-case-list", "api-case-from-run"], "dataset"),
    **dict.fromkeys(["case_edit", "api-case-detail"], "case"),
    **dict.fromkeys(["experiment_detail", "experiment_progress", "experiment_cancel", "api-experiment-detail",
                     "api-experiment-cancel", "experiment_compare", "case_compare", "api-experiment-compare"],
                    "experiment"),
}

# The other arguments: which of Beta's things each names (`number`: the agent's version).
ARGUMENT = {
    "agent_id": lambda w: w.agent.pk,
    "dataset_id": lambda w: w.dataset.pk,
    "call_pk": lambda w: w.approval.tool_call_id,
    "number": lambda w: w.agent.version,
    "other": lambda w: w.baseline.pk,
    "other_id": lambda w: w.baseline.pk,
    "case_id": lambda w: w.case.pk,
    "index": lambda w: 1,  # a step of the run
}

# What a GET needs besides the arguments to show the thing rather than a 404 of its own.
QUERY = {"step_replay": "?step=1", "agent_version_compare": "?a=1&b=1"}


def url_of(name: str, w, **which) -> str:
    """The route's URL naming `w`'s things (`which`: an argument naming another's thing instead)."""
    route_arguments = routes_with_arguments()[name]
    unknown = [arg for arg in route_arguments if arg != "pk" and arg not in ARGUMENT]
    assert name in ROUTE_THING and not unknown, f"{EXTEND}: {name} {route_arguments}"
    kwargs = {}
    for arg in route_arguments:
        of = which.get(arg, w)
        kwargs[arg] = getattr(of, ROUTE_THING[name]).pk if arg == "pk" else ARGUMENT[arg](of)
    return reverse(name, kwargs=kwargs) + QUERY.get(name, "")


def test_the_test_knows_every_registered_routes_arguments():
    routes = routes_with_arguments()
    unknown = sorted(name for name in OBJECT_ROUTES
                     if name not in ROUTE_THING or any(arg != "pk" and arg not in ARGUMENT for arg in routes.get(name, ())))
    assert not unknown, f"{EXTEND}: {unknown}"


def things_of(project_, prefix: str, launch) -> SimpleNamespace:
    """One of every kind of thing in the project: its agent with a run waiting on an approval, a
    grant, a fork, a memory, a rule, a budget, a webhook, a tool, an MCP server, a dataset with a
    case and two experiments of it."""
    w = SimpleNamespace(project=project_)
    # The demo agent's tools (cancel_order asks a person), shared by the site for every project's agents.
    tools = list(Agent.objects.get(name="demo").tools.all())
    Tool.objects.filter(pk__in=[t.pk for t in tools]).update(project=None)
    tools = list(Tool.objects.filter(pk__in=[t.pk for t in tools]))
    w.agent = agent_save(agent=None, data={"name": f"{prefix}-bot", "tools": tools}, project=project_)
    w.run = launch("Cancel order ORD-1001", agent=f"{prefix}-bot", approval_policy="ask")
    w.approval = pending_approval(w.run)
    w.grant = RunGrant.objects.create(run=w.run, tool_name="cancel_order", granted_by_name="bea")
    w.fork = run_fork(run_id=w.run.pk, step_index=1, user=None)
    w.memory = Memory.objects.create(agent=w.agent, text="Acme ships by rail, never by air")
    w.rule = ApprovalRule.objects.create(name=f"{prefix} asks", action="ask", tool_pattern="cancel_*", project=project_)
    w.budget = Budget.objects.create(name=prefix, measure="tokens", period="day", limit=10**9, project=project_)
    w.webhook = Webhook.objects.create(url=f"https://hooks.example.invalid/{prefix}", project=project_)
    w.tool = Tool.objects.create(name=f"{prefix}_lookup", handler="get_weather", project=project_,
                                 parameters={"type": "object", "properties": {}})
    w.server = McpServer.objects.create(name=f"{prefix}-mcp", transport="http",
                                        url=f"https://{prefix}.mcp.example.invalid/mcp", project=project_)
    w.dataset = Dataset.objects.create(name=f"{prefix}-cases", project=project_)
    w.case = data.case_add(dataset=w.dataset, data={"task": "What's the weather in Oslo?",
                                                    "expectations": [{"kind": "no_destructive_call"}]})
    w.baseline = experiment_start(dataset=w.dataset, agent=w.agent)
    w.experiment = experiment_start(dataset=w.dataset, agent=w.agent, baseline=w.baseline)
    # Every route's arguments name things of this project (so a 404 below is the scope's, not a
    # missing row's).
    for name in sorted(set(ROUTE_THING) & set(OBJECT_ROUTES)):
        url = url_of(name, w)
        found = set(OBJECT_ROUTES[name](get_resolver().resolve(url.split("?")[0]).kwargs))
        assert found == {project_.pk}, f"{name}: {url} names no thing of {project_} ({found})"
    return w


@pytest.fixture
def beta(demo_data, launch):
    w = things_of(project("Beta"), "beta", launch)
    w.alpha, w.beta = project("Alpha"), w.project
    return w


def session(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def token_limited_to(user, project_) -> APIClient:
    """An API client with a token of the person's limited to one project."""
    made, key = api_token_create(user=user, name="scoping")
    ApiToken.objects.filter(pk=made.pk).update(project=project_)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def made_over_the_api(username: str, password: str) -> APIClient:
    """A token got the way a person gets one: POST /api/v1/token/ with their password."""
    answer = APIClient().post("/api/v1/token/", {"username": username, "password": password}, format="json")
    assert answer.status_code == 200, answer.content
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {answer.json()['token']}")
    return client


def callers(user, password: str) -> dict[str, Client]:
    """The person signed in, and with a token they made (used for the API's routes only)."""
    return {"signed in": session(user), "with a token": made_over_the_api(user.username, password)}


def get(client, url):
    return client.get(url, HTTP_ACCEPT="text/html,application/json")


def post(client, url):
    if isinstance(client, APIClient):
        return client.post(url, {}, format="json")
    return client.post(url, {})


def test_people_of_another_project_get_404_for_every_route_naming_a_thing(beta):
    assert set(OBJECT_ROUTES) <= set(ROUTE_THING), EXTEND
    olga = member("olga", beta.alpha, "operators")  # an operator of Alpha only
    ada = member("ada", beta.alpha, "admins")  # an admin of Alpha only
    bea = member("bea", beta.beta, "admins")  # an admin of Beta
    root = make_user("root", "admins")  # a site admin, with a token limited to Alpha
    password = "pw-long-enough-1"
    outsiders = {f"{user.username} ({role} of Alpha only) {how}": client
                 for user, role in ((olga, "operator"), (ada, "admin"))
                 for how, client in callers(user, password).items()}
    insiders = {f"bea (admin of Beta) {how}": client for how, client in callers(bea, password).items()}
    alpha_token = {"root (site admin) with a token limited to Alpha": token_limited_to(root, beta.alpha)}

    leaks, not_found = [], []
    for name in sorted(OBJECT_ROUTES):
        url = url_of(name, beta)
        is_api = name.startswith("api-")
        # Beta's admin first: the thing is there (before any POST below could change it).
        for who, client in insiders.items():
            if is_api or not isinstance(client, APIClient):
                answer = get(client, url)
                if answer.status_code == 404:
                    not_found.append(f"{name} GET {url} by {who}: 404")
        for who, client in {**outsiders, **(alpha_token if is_api else {})}.items():
            if not is_api and isinstance(client, APIClient):
                continue  # a page takes no token
            for method, ask in (("GET", get), ("POST", post)):
                answer = ask(client, url)
                if answer.status_code != 404:
                    leaks.append(f"{name} {method} {url} by {who}: {answer.status_code}")
    assert not (leaks or not_found), (
        "Beta's things answered people who do not see Beta (expected 404):\n" + "\n".join(leaks)
        + "\nBeta's own admin was told these things do not exist (the test's arguments name nothing?):\n"
        + "\n".join(not_found))


def test_a_site_admin_gets_every_projects_things(beta):
    assert set(OBJECT_ROUTES) <= set(ROUTE_THING), EXTEND
    root = make_user("root", "admins")
    clients = {"signed in": session(root), "with a token": made_over_the_api("root", "pw-root")}
    not_found = []
    for name in sorted(OBJECT_ROUTES):
        url = url_of(name, beta)
        for how, client in clients.items():
            if isinstance(client, APIClient) and not name.startswith("api-"):
                continue
            answer = get(client, url)
            if answer.status_code == 404:
                not_found.append(f"{name} GET {url} {how}: 404")
    assert not not_found, "A site admin was told these things do not exist:\n" + "\n".join(not_found)


def test_a_thing_of_another_project_under_ones_own_is_as_if_it_did_not_exist(beta, launch):
    """A route naming two things (a memory of an agent, a case of a dataset, a call of a run, two
    experiments) checks the project of only some of them: with one of them Beta's and the others
    Alpha's, an admin of Alpha gets 404 for GET, and for POST 404 or what a thing that does not
    exist gets (a route that takes no POST refuses it the same for every id)."""
    alpha = things_of(beta.alpha, "alpha", launch)
    ada = member("ada", beta.alpha, "admins")
    clients = {"signed in": session(ada), "with a token": made_over_the_api("ada", "pw-long-enough-1")}
    nothing = SimpleNamespace(**{thing: SimpleNamespace(pk=10**6, tool_call_id=10**6)  # ids of no thing
                                 for thing in {*ROUTE_THING.values(), "baseline"}})
    routes = routes_with_arguments()
    mixed = [(name, arg) for name in sorted(OBJECT_ROUTES) for arg in routes[name]
             if len(routes[name]) > 1 and arg not in ("number", "index")]  # a version's number, a step's index: no thing of their own
    assert {("memory_edit", "pk"), ("case_edit", "pk"), ("call_result", "call_pk"), ("case_compare", "case_id"),
            ("api-case-detail", "pk"), ("api-experiment-compare", "other_id")} <= set(mixed)
    leaks, not_found = [], []
    for name, arg in mixed:
        own, crossed = url_of(name, alpha), url_of(name, alpha, **{arg: beta})
        missing = url_of(name, alpha, **{arg: nothing})
        for how, client in clients.items():
            if isinstance(client, APIClient) and not name.startswith("api-"):
                continue
            if get(client, own).status_code == 404:
                not_found.append(f"{name} GET {own} {how}: 404")
            for method, ask in (("GET", get), ("POST", post)):
                # 404, or (POST) what a thing that does not exist gets.
                expected = {404} if method == "GET" else {404, ask(client, missing).status_code}
                answer = ask(client, crossed)
                if answer.status_code not in expected:
                    leaks.append(f"{name} {method} {crossed} ({arg} Beta's) {how}: {answer.status_code}, "
                                 f"not {' or '.join(map(str, sorted(expected)))}")
    assert not (leaks or not_found), (
        "A thing of Beta named under one of Alpha answered an admin of Alpha only:\n"
        + "\n".join(leaks) + "\nAlpha's admin was told Alpha's own things do not exist:\n" + "\n".join(not_found))
