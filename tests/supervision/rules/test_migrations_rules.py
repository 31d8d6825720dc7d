"""The data migration that moved a rule's launcher from a name to an account."""
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("runs", "0016_approval_and_month_rollups")]
AFTER = [("runs", "0017_rule_launcher_account")]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()  # the graph as the database has it now
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture
def old_apps(transactional_db):
    apps = migrate(BEFORE)
    yield apps
    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())  # back to the latest schema


def test_launcher_names_become_accounts_and_a_name_without_one_matches_nobody(old_apps):
    User, Rule = old_apps.get_model("auth", "User"), old_apps.get_model("runs", "ApprovalRule")
    ada = User.objects.create(username="ada")
    Rule.objects.create(name="by ada", launched_by="ada")
    Rule.objects.create(name="by carol", launched_by="carol")  # nobody has that name (yet)
    Rule.objects.create(name="by anyone", launched_by="")

    Rule = migrate(AFTER).get_model("runs", "ApprovalRule")
    rules = {r.name: (r.launched_by_id, r.launched_by_unresolved) for r in Rule.objects.all()}
    assert rules == {"by ada": (ada.pk, ""), "by carol": (None, "carol"), "by anyone": (None, "")}

    Rule = migrate(BEFORE).get_model("runs", "ApprovalRule")
    assert {r.name: r.launched_by for r in Rule.objects.all()} == {"by ada": "ada", "by carol": "carol", "by anyone": ""}
