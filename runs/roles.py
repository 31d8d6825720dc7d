"""Roles are groups with permissions. Every view, API call and websocket checks permissions,
never group names, so an installation can define its own roles."""
from django.db.models import Q

VIEW = [
    ("runs", "view_run"), ("runs", "view_agent"), ("runs", "view_approval"), ("runs", "view_step"),
    ("runs", "view_toolcall"), ("toolsapp", "view_tool"), ("runs", "view_approvalrule"),
    ("memory", "view_memory"), ("evals", "view_dataset"), ("evals", "view_experiment"), ("runs", "view_budget"),
]
OPERATE = VIEW + [
    ("runs", "add_run"), ("runs", "cancel_run"), ("runs", "decide_approval"),
    ("evals", "add_dataset"), ("evals", "change_dataset"), ("evals", "run_experiment"),
]
ADMIN = OPERATE + [
    ("runs", "add_agent"), ("runs", "change_agent"), ("runs", "delete_agent"),
    ("toolsapp", "add_tool"), ("toolsapp", "change_tool"), ("toolsapp", "delete_tool"),
    ("runs", "add_approvalrule"), ("runs", "change_approvalrule"), ("runs", "delete_approvalrule"),
    ("runs", "view_webhook"), ("runs", "add_webhook"), ("runs", "change_webhook"), ("runs", "delete_webhook"),
    ("memory", "change_memory"), ("memory", "delete_memory"), ("evals", "delete_dataset"),
    ("audit", "view_auditentry"),
    ("runs", "add_budget"), ("runs", "change_budget"), ("runs", "delete_budget"),
]
ROLES = {"viewers": VIEW, "operators": OPERATE, "admins": ADMIN}

# The permission each action needs.
PERM_VIEW = "runs.view_run"
PERM_LAUNCH = "runs.add_run"
PERM_CANCEL = "runs.cancel_run"
# Launching (or re-running) a run whose destructive calls are approved without a person: given
# to no role by default; superusers have it.
PERM_APPROVE_ALL = "runs.approve_all_launch"
PERM_DECIDE = "runs.decide_approval"
PERM_MANAGE_AGENTS = "runs.change_agent"
PERM_MANAGE_TOOLS = "toolsapp.change_tool"
PERM_VIEW_AGENT = "runs.view_agent"
PERM_ADD_AGENT = "runs.add_agent"
PERM_DELETE_AGENT = "runs.delete_agent"
PERM_VIEW_APPROVAL = "runs.view_approval"
# Approval rules: everyone who sees runs may read them (the queue names them); admins write them.
PERM_VIEW_RULES = "runs.view_approvalrule"
PERM_MANAGE_RULES = "runs.change_approvalrule"
PERM_ADD_RULES = "runs.add_approvalrule"
PERM_DELETE_RULES = "runs.delete_approvalrule"
PERM_VIEW_TOOL = "toolsapp.view_tool"
PERM_ADD_TOOL = "toolsapp.add_tool"
PERM_DELETE_TOOL = "toolsapp.delete_tool"
# The notification receivers: admins list, add, test and remove them.
PERM_MANAGE_WEBHOOKS = "runs.change_webhook"
# Agents' long-term memories: everyone who sees runs reads them; admins correct and delete facts.
PERM_VIEW_MEMORY = "memory.view_memory"
PERM_CHANGE_MEMORY = "memory.change_memory"
PERM_DELETE_MEMORY = "memory.delete_memory"
# Datasets and experiments: everyone who sees runs reads them; operators make cases and run
# experiments (nothing real changes); admins delete datasets.
PERM_VIEW_DATASET = "evals.view_dataset"
PERM_CHANGE_DATASET = "evals.change_dataset"
PERM_ADD_DATASET = "evals.add_dataset"
PERM_DELETE_DATASET = "evals.delete_dataset"
PERM_RUN_EXPERIMENT = "evals.run_experiment"
PERM_VIEW_EXPERIMENT = "evals.view_experiment"
# Budgets: everyone who sees runs sees them and what they used; admins write them and raise them
# (from the queue, where a run waits on a spent one); an operator may stop such a run.
PERM_VIEW_BUDGET = "runs.view_budget"
PERM_CHANGE_BUDGET = "runs.change_budget"


def roles_migrate(apps, schema_editor) -> None:
    """The migrations' step that brings the roles up to ROLES: permissions are normally created
    after migrate, so the ones of models added by earlier migrations are created first."""
    from django.contrib.auth.management import create_permissions

    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    ensure_roles(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


def ensure_roles(Group, Permission) -> None:
    for name, perms in ROLES.items():
        group, _ = Group.objects.get_or_create(name=name)
        # An earlier migration runs this before later models (and their permissions) exist;
        # the migration that adds them calls it again.
        wanted = Q()
        for app, code in perms:
            wanted |= Q(content_type__app_label=app, codename=code)
        group.permissions.set(Permission.objects.filter(wanted))
