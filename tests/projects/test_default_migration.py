"""The upgrade to projects, over a database of before (projects/migrations/0002_default_project.py and
the apps' migrations that add `project`): everything there is goes into the project "Default", the
people of the role groups become its members with their role (the widest, for a person in several),
out of the groups; going back puts them in the groups again and forgets the memberships.

The database is migrated back to the state before projects, filled with the models of then, and
migrated forwards, backwards and forwards again (to the latest, as the next test expects it)."""
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [
    ("runs", "0040_budgets"),
    ("toolsapp", "0009_experiments"),
    ("evals", "0003_snapshots"),
    ("accounts", "0004_chatidentity"),
    ("projects", "0001_initial"),
]
AFTER = [
    ("runs", "0041_projects"),
    ("toolsapp", "0010_projects"),
    ("evals", "0004_projects"),
    ("accounts", "0005_token_project"),
    ("projects", "0002_default_project"),
]


def migrate(targets):
    """Migrate to `targets` (None: the latest of every app); the models of that state."""
    executor = MigrationExecutor(connection)
    if targets is None:
        targets = executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    executor.loader.build_graph()  # what is applied now
    return executor.loader.project_state(targets).apps


def groups_of(apps, username: str) -> set[str]:
    User = apps.get_model("auth", "User")
    return set(User.objects.get(username=username).groups.values_list("name", flat=True))


def roles_in_default(apps) -> dict[str, str]:
    Membership = apps.get_model("projects", "Membership")
    return dict(Membership.objects.filter(project__slug="default").values_list("user__username", "role__name"))


@pytest.mark.django_db(transaction=True)
def test_the_upgrade_puts_everything_and_everyone_into_default_and_back():
    # The migrations' own names, so a renamed one fails here rather than migrating somewhere else.
    graph = MigrationExecutor(connection).loader.graph
    assert all(node in graph.nodes for node in BEFORE + AFTER)
    assert set(graph.node_map[("projects", "0002_default_project")].children) >= {
        ("runs", "0041_projects"), ("toolsapp", "0010_projects"), ("evals", "0004_projects"),
        ("accounts", "0005_token_project")}
    try:
        before = migrate(BEFORE)
        Group, User = before.get_model("auth", "Group"), before.get_model("auth", "User")
        # A database of before has no project (going back kept the Default the test database was made with).
        before.get_model("projects", "Project").objects.all().delete()
        groups = {name: Group.objects.get_or_create(name=name)[0]
                  for name in ("viewers", "operators", "admins", "finance")}
        olga = User.objects.create(username="olga")
        olga.groups.add(groups["operators"], groups["finance"])  # finance: no role group, kept
        ada = User.objects.create(username="ada")
        ada.groups.add(groups["admins"], groups["viewers"])
        vic = User.objects.create(username="vic")
        vic.groups.add(groups["viewers"])
        User.objects.create(username="nobody")  # in no group: no role, and none after
        agent = before.get_model("runs", "Agent").objects.create(name="support")
        rule = before.get_model("runs", "ApprovalRule").objects.create(name="ask", action="ask")
        budget = before.get_model("runs", "Budget").objects.create(name="Support", limit=50)
        webhook = before.get_model("runs", "Webhook").objects.create(url="https://hooks.example.invalid/a")
        dataset = before.get_model("evals", "Dataset").objects.create(name="cases")
        tool = before.get_model("toolsapp", "Tool").objects.create(name="lookup", handler="get_weather")
        server = before.get_model("toolsapp", "McpServer").objects.create(
            name="tickets", transport="http", url="https://mcp.example.invalid/mcp")

        after = migrate(AFTER)
        Project = after.get_model("projects", "Project")
        default = Project.objects.get(slug="default")
        assert default.name == "Default" and Project.objects.count() == 1
        for app, model, row in (("runs", "Agent", agent), ("runs", "ApprovalRule", rule), ("runs", "Budget", budget),
                                ("runs", "Webhook", webhook), ("evals", "Dataset", dataset),
                                ("toolsapp", "Tool", tool), ("toolsapp", "McpServer", server)):
            assert after.get_model(app, model).objects.get(pk=row.pk).project_id == default.pk, model
        assert roles_in_default(after) == {"olga": "operators", "ada": "admins", "vic": "viewers"}
        assert after.get_model("projects", "Membership").objects.count() == 3
        # Out of the role groups (a role is now Default's only), in the others still.
        assert groups_of(after, "olga") == {"finance"}
        assert groups_of(after, "ada") == groups_of(after, "vic") == groups_of(after, "nobody") == set()

        back = migrate(BEFORE)
        assert not back.get_model("projects", "Membership").objects.exists()
        assert groups_of(back, "olga") == {"operators", "finance"}
        assert "admins" in groups_of(back, "ada")  # the widest role she had: her access is as before
        assert groups_of(back, "vic") == {"viewers"}
        assert groups_of(back, "nobody") == set()
        assert back.get_model("runs", "Agent").objects.filter(pk=agent.pk).exists()
    finally:
        migrate(None)  # the latest again, for the tests after this one
    latest = MigrationExecutor(connection)
    assert not latest.migration_plan(latest.loader.graph.leaf_nodes())
