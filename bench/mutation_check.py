"""Break each line a guarantee rests on, run the tests that should notice, print caught or missed.

A guarantee is only as good as the test that fails without it. Each mutation below names a file,
an exact snippet of it (found exactly once, or the check says so), what it becomes, and the
tests meant to catch it. Each break is applied in a temporary copy of the tree (your checkout is
never touched), its tests run, and the file is put back before the next one.

    REDIS_URL=redis://127.0.0.1:6379/8 .venv/bin/python bench/mutation_check.py [--only NAME ...] [--list]

The database is whatever the environment says (SQLite when DATABASE_URL is unset; set it to a
PostgreSQL URL for the PostgreSQL pass). A mutation is "caught" when its tests fail, "missed"
when they all pass. The unbroken tree is run first with the same tests: a test that already
fails proves nothing (reported as "baseline failed" and the check exits 2). Exit status 1 when
any mutation is missed.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LC = "tests/engine/loop_contract"
FM = "tests/engine/fault_matrix"


@dataclass(frozen=True)
class Mutation:
    name: str
    path: str
    original: str
    broken: str
    tests: tuple[str, ...]


MUTATIONS = [
    # Issue 47's own lines (the moment of decision).
    Mutation(
        "i47 twins: a twin that ran holds a call for a person", "runs/supervision/rules/who_decides.py",
        '    ) + [f"the same call {twin}" for twin in twins_ran]',
        "    )",
        ("tests/supervision/evidence/test_evidence_in_loop.py",),
    ),
    Mutation(
        "i47 rules: outside content is a condition", "runs/supervision/rules/conditions.py",
        '        return found is not _MISSING and from_outside(condition["path"], facts.outside_paths)',
        "        return False",
        ("tests/supervision/evidence/test_evidence_in_loop.py",),
    ),
    Mutation(
        "i47 twins: approving twins together needs their names", "runs/supervision/evidence/twins.py",
        "    if conflicts and not set(confirmation_needed(conflicts)) <= set(confirmed or ()):",
        "    if False:",
        ("tests/supervision/evidence/twins/test_twins_confirmed.py",),
    ),
    Mutation(
        "i47 backtest: a save over rejections needs them confirmed", "runs/supervision/rules/saved_over.py",
        '    if calls and {call["approval"] for call in calls} != set(confirmed or ()):',
        "    if False:",
        ("tests/supervision/rules/test_backtest_saving.py", "tests/supervision/rules/test_backtest_api.py"),
    ),
    Mutation(
        "i47 backtest: one project's decisions only", "runs/supervision/rules/backtest.py",
        'run__agent_id__in=Agent.objects.filter(project_id=project_id).values("pk"), ',
        "",
        ("tests/supervision/rules/test_backtest.py",),
    ),
    Mutation(
        "i47 prior reads: the read must have happened", "runs/engine/tools/prior_reads.py",
        """    if any(all(same_value(call.get(name), value) for name, value in values.items())
           for call in earlier if isinstance(call, dict)):
        return None""",
        "    return None",
        ("tests/engine/tools/test_prior_reads.py",),
    ),
    Mutation(
        "i47 nudge: a due nudge refuses an approval without a reason", "runs/supervision/quality/nudges.py",
        "    if streak:\n        raise NotAllowed(",
        "    if False:\n        raise NotAllowed(",
        ("tests/supervision/quality/test_nudge.py",),
    ),
    Mutation(
        "i47 evidence: a sensitive value is masked", "runs/supervision/evidence/sources.py",
        '        entry = {"path": path, "value": MASK if secret else value}',
        '        entry = {"path": path, "value": value}',
        ("tests/supervision/evidence/test_provenance.py",),
    ),
    # Issue 46's own lines (round four of the promises at the edges).
    # Not listed, as each is backed by another guard (a break of one alone changes nothing anyone sees):
    # a limited token's change of a shared tool is refused by projects/access.py may() and by
    # apikit/permissions.py each; the API's limit_refusal is answered by RequestLimitsMiddleware's
    # process_exception too, whose own /api/ branch no route reaches while the API's handler answers.
    Mutation(
        "i46 stream: a new id starts a new call", "runs/engine/llm/stream.py",
        "        return id_changed or (renamed and not (call_id and call_id == call.id))",
        "        return False or (renamed and not (call_id and call_id == call.id))",
        ("tests/engine/llm/test_stream.py",),
    ),
    Mutation(
        "i46 stream: a new name after complete arguments starts a new call", "runs/engine/llm/stream.py",
        "        return id_changed or (renamed and not (call_id and call_id == call.id))",
        "        return id_changed",
        ("tests/engine/llm/test_stream.py", "tests/engine/loop_contract/test_provider_streams.py"),
    ),
    Mutation(
        "i46 stream: vLLM's in-stream error is an error", "runs/engine/llm/stream.py",
        'if isinstance(chunk, dict) and (chunk.get("error") or chunk.get("object") == "error"):',
        'if isinstance(chunk, dict) and chunk.get("error"):',
        ("tests/engine/llm/test_stream.py", "tests/engine/loop_contract/test_provider_streams.py"),
    ),
    Mutation(
        "i46 stream: vLLM's error keeps the provider's words", "runs/engine/llm/answers.py",
        '    if not error and isinstance(obj, dict) and obj.get("object") == "error":\n',
        "    if False:\n",
        ("tests/engine/llm/test_stream.py", "tests/engine/loop_contract/test_provider_streams.py"),
    ),
    Mutation(
        "i46 gzip: a body not as labelled is the model's failure", "runs/engine/llm/limits.py",
        "        except DecodingError as exc:\n",
        "        except ZeroDivisionError as exc:\n",
        ("tests/engine/loop_contract/test_provider_streams.py",),
    ),
    Mutation(
        "i46 refused arguments: long ones go back as a note", "runs/engine/context/window.py",
        "    if not isinstance(arguments, str) or len(arguments) <= REFUSED_KEPT_CHARS:\n",
        "    if True:\n",
        ("tests/engine/loop_contract/test_context.py", "tests/engine/context/test_window.py"),
    ),
    Mutation(
        "i46 refused arguments: only calls refused before they ran", "runs/engine/context/conversation.py",
        "    refused = status == ToolCall.Status.FAILED and latency_ms is None\n",
        "    refused = status == ToolCall.Status.FAILED\n",
        ("tests/engine/loop_contract/test_context.py", "tests/engine/context/test_window.py"),
    ),
    Mutation(
        "i46 replay: a reached budget refuses it", "runs/lifecycle/replay.py",
        "    found = replay_reached(run)\n",
        "    found = None\n",
        ("tests/lifecycle/test_step_replay_spending.py", "tests/web/api/test_api_step_replay.py"),
    ),
    Mutation(
        "i46 replay: REPLAYS_AT_ONCE slots", "runs/lifecycle/replay.py",
        "        if cache.add(key, token, timeout=slot_seconds()):\n",
        "        if cache.set(key, token, timeout=slot_seconds()) or True:\n",
        ("tests/lifecycle/test_step_replay_spending.py",),
    ),
    Mutation(
        "i46 replay: a slot is given back", "runs/lifecycle/replay.py",
        "        if cache.get(key) == token:",
        "        if False:",
        ("tests/lifecycle/test_step_replay_spending.py",),
    ),
    Mutation(
        "i46 replay: too many in flight is a 429", "runs/web/api/views/replays.py",
        "            raise Throttled(detail=str(exc))\n",
        "            raise ValidationError(str(exc))\n",
        ("tests/lifecycle/test_step_replay_spending.py::"
         "test_a_person_has_at_most_two_replays_in_flight_and_a_slot_is_given_back_however_it_ends",),
    ),
    Mutation(
        "i46 budgets: replays count in cost and tokens budgets", "runs/controls/budgets.py",
        '            used[budget.pk] += float(replays[f"b{budget.pk}"] or 0)\n',
        "            used[budget.pk] += 0\n",
        ("tests/lifecycle/test_step_replay_spending.py",),
    ),
    Mutation(
        "i46 budgets: a replay counts in its own project's budgets only", "runs/controls/budgets.py",
        "    scope = Q(created_at__gte=period_start(budget.period, now), run__agent__project_id=budget.project_id)\n",
        "    scope = Q(created_at__gte=period_start(budget.period, now))\n",
        ("tests/lifecycle/test_step_replay_spending.py",),
    ),
    Mutation(
        "i46 budgets API: runs waiting on a budget of your projects", "runs/web/api/views/budgets.py",
        "WaitingOnBudgetSerializer(budget_requests(projects=projects), many=True)",
        "WaitingOnBudgetSerializer(budget_requests(), many=True)",
        ("tests/projects/test_budget_and_rule_scoping.py",),
    ),
    Mutation(
        "i46 budget raise: a run of the budget's project only", "runs/controls/budget_requests.py",
        "        runs = Run.objects.filter(pk=run_id, agent__project_id=budget.project_id)\n",
        "        runs = Run.objects.filter(pk=run_id)\n",
        ("tests/projects/test_budget_and_rule_scoping.py",),
    ),
    Mutation(
        "i46 people_of: the project's members", "projects/choices.py",
        'Q(pk__in=Membership.objects.filter(project_id__in=projects).values("user_id"))',
        'Q(pk__in=Membership.objects.values("user_id"))',
        ("tests/projects/test_budget_and_rule_scoping.py",),
    ),
    Mutation(
        "i46 API: a rule's or budget's person is of its project", "apikit/fields.py",
        "    if not people_of({project.pk}).filter(pk=person.pk).exists():\n",
        "    if False:\n",
        ("tests/projects/test_budget_and_rule_scoping.py",),
    ),
    Mutation(
        "i46 rule form: a new rule's launcher is of its project", "runs/web/forms/rules.py",
        "        if not people_of({project.pk}).filter(pk=launcher.pk).exists():\n",
        "        if False:\n",
        ("tests/projects/test_budget_and_rule_scoping.py",),
    ),
    Mutation(
        "i46 token limit: a limited token sees its own project's tokens", "runs/web/api/views/tokens.py",
        "        tokens = tokens.filter(project_id=request.auth.project_id)\n",
        "        tokens = tokens\n",
        ("tests/projects/test_token_limits.py",),
    ),
    Mutation(
        "i46 websocket origin: the port counts", "agentsite/websocket_origin.py",
        "    return parts.scheme, parts.hostname, port or DEFAULT_PORTS[parts.scheme]\n",
        "    return parts.scheme, parts.hostname, 0\n",
        ("tests/web/websockets/test_consumer_origin.py",),
    ),
    Mutation(
        "i46 websocket origin: wss is https", "agentsite/websocket_origin.py",
        '    scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"\n',
        '    scheme = "http"\n',
        ("tests/web/websockets/test_consumer_origin.py",),
    ),
    Mutation(
        "i46 approvals socket: projects read again", "runs/web/consumers/approvals.py",
        "            self.projects = projects  # added",
        "            pass  # added",
        ("tests/web/websockets/test_consumer_approvals_projects.py",),
    ),
    Mutation(
        "i46 sockets: rights checked again when due", "runs/web/consumers/rights.py",
        "        if not self.refused and time.monotonic() - self.rights_checked_at < RIGHTS_RECHECK_SECONDS:\n",
        "        if not self.refused:\n",
        ("tests/web/websockets/test_consumer_approvals_projects.py", "tests/web/websockets/test_consumer_timeline_rights.py"),
    ),
    Mutation(
        "i46 SSO: a role in a missing project is no role", "accounts/sso_users.py",
        "    roles = _roles_that_exist(roles_from_claims(claims, claim=claim, role_map=role_map))\n",
        "    roles = roles_from_claims(claims, claim=claim, role_map=role_map)\n",
        ("tests/accounts/test_sso_users.py",),
    ),
    Mutation(
        "i46 waits: a decision before its request waits 0", "runs/observability/metrics/aggregates.py",
        '        When(decided_at__lt=F("requested_at"), then=Value(0.0)),\n',
        '        When(decided_at__lt=F("requested_at"), then=SecondsBetween("decided_at", "requested_at")),\n',
        ("tests/observability/metrics/test_metrics.py::test_a_decision_stamped_before_its_request_waits_0_on_the_page_never_less",
         "tests/observability/prometheus/test_prometheus.py::test_a_rule_decides_with_a_wait_of_zero_and_no_wait_is_ever_negative"),
    ),
    Mutation(
        "i46 gate: a rule's decision takes its request's time", "runs/supervision/approvals/gate.py",
        "            approval.decided_at = approval.requested_at\n",
        "            approval.decided_at = now\n",
        ("tests/observability/prometheus/test_prometheus.py::test_a_rule_decides_with_a_wait_of_zero_and_no_wait_is_ever_negative",
         "tests/observability/tracing/test_tracing.py::test_a_call_a_rule_approves_shows_a_wait_of_zero_never_a_negative_one"),
    ),
    Mutation(
        "i46 traces: a span's wait is never negative", "runs/observability/tracing/approval_events.py",
        '    attributes["agentsite.approval.wait_ms"] = max((approval.decided_at - approval.requested_at).total_seconds() * 1000, 0.0)\n',
        '    attributes["agentsite.approval.wait_ms"] = (approval.decided_at - approval.requested_at).total_seconds() * 1000\n',
        ("tests/observability/tracing/test_tracing.py::test_a_call_a_rule_approves_shows_a_wait_of_zero_never_a_negative_one",
         "tests/observability/tracing/test_tracing.py::"
         "test_a_decision_stamped_by_a_clock_behind_the_askers_shows_a_wait_of_zero_in_the_trace"),
    ),
    Mutation(
        "i46 traces: a chat span names the model that answered", "runs/observability/tracing/run_spans.py",
        "    asked = model_answering(step.model_errors or [], list(models)) or step.model\n",
        "    asked = models[0]\n",
        ("tests/observability/tracing/test_tracing.py", "tests/observability/tracing/test_tracing_ids.py"),
    ),
    Mutation(
        "i46 traces: a model asked again is the one that answered", "runs/observability/tracing/values.py",
        "    if errors[-1].endswith(ASKED_AGAIN):\n",
        "    if False:\n",
        ("tests/observability/tracing/test_tracing.py", "tests/observability/tracing/test_tracing_ids.py"),
    ),
    Mutation(
        "i46 traces: the conversation id names the installation", "runs/observability/tracing/values.py",
        '    return f"{installation_id(key)}-{run_id}"\n',
        "    return str(run_id)\n",
        ("tests/observability/tracing/test_tracing.py", "tests/observability/tracing/test_tracing_ids.py"),
    ),
    Mutation(
        "i46 traces: PHOENIX_PROJECT_NAME names the project", "runs/observability/tracing/exporter.py",
        "            attributes[PROJECT_NAME] = project\n",
        "            pass\n",
        ("tests/observability/tracing/test_tracing.py::test_the_project_the_spans_land_in_is_named_by_phoenix_project_name",),
    ),
    Mutation(
        "i46 request limits: the middleware reads a form first", "agentsite/settings.py",
        '    "runs.web.request_limits.RequestLimitsMiddleware",',
        "",
        ("tests/web/pages/test_request_limits_pages.py", "tests/web/api/test_api_refusals.py"),
    ),
    Mutation(
        "i46 request limits: 10 MB is read", "agentsite/settings.py",
        'DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 10 * 1024 * 1024)',
        'DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 2621440)',
        ("tests/web/api/test_api_refusals.py",),
    ),
    Mutation(
        "i46 errors: JSON under /api/ before any view", "runs/web/views/errors.py",
        '    return request.path_info.startswith("/api/")  # under a script prefix too\n',
        "    return False\n",
        ("tests/web/api/test_api_refusals.py",),
    ),
    Mutation(
        "i46 errors: a wrong host under /api/ is JSON", "agentsite/urls.py",
        'handler400 = "runs.web.views.errors.bad_request"\n',
        "\n",
        ("tests/web/api/test_api_refusals.py",),
    ),
    Mutation(
        "i46 datasets: a raw control character is named", "evals/datasets.py",
        '    if exc.msg.startswith("Invalid control character") and exc.pos < len(line):\n',
        "    if False:\n",
        ("tests/evals/test_api.py::test_a_raw_nul_in_an_imported_line_is_named_with_its_line_and_column",
         "tests/evals/test_pages.py::test_an_imported_line_with_a_raw_nul_is_named_with_its_column"),
    ),
    Mutation(
        "i46 datasets: the API's JSON form leaves a NUL to the import", "evals/api/serializers.py",
        "        self.validators = [v for v in self.validators if not isinstance(v, ProhibitNullCharactersValidator)]\n",
        "        pass\n",
        ("tests/evals/test_api.py::test_a_raw_nul_in_an_imported_line_is_named_with_its_line_and_column",),
    ),
    Mutation(
        "i46 datasets: JSONL split at line feeds only", "evals/datasets.py",
        '    return [line.removesuffix("\\r") for line in text.split("\\n")]\n',
        "    return text.splitlines()\n",
        ("tests/evals/test_api.py::test_a_case_holding_unicode_line_separators_survives_export_then_import",),
    ),
    Mutation(
        "i46 datasets: a scoped import splits at line feeds only", "evals/services_projects.py",
        '    lines = [line for line in re.split(r"(?<=\\n)", text) if line]',
        "    lines = text.splitlines(keepends=True)",
        ("tests/evals/test_api.py::test_a_case_holding_unicode_line_separators_survives_export_then_import",
         "tests/projects/test_evals_scoping.py::"
         "test_a_source_run_of_another_project_is_dropped_from_a_line_holding_a_unicode_line_separator"),
    ),
    Mutation(
        "i46 eval command: an OK says how many failed", "evals/verdict.py",
        '    return f"{said} and {failed} failed" if failed else said\n',
        "    return said\n",
        ("tests/evals/test_eval_command.py",),
    ),
    Mutation(
        "i46 archive: a decision keeps its run's project", "runs/lifecycle/archive.py",
        "            project_id=run.agent.project_id,  # whose",
        "            project_id=None,  # whose",
        ("tests/projects/test_archive_scoping.py",),
    ),
    Mutation(
        "i46 archive: archived decisions read by their project", "runs/supervision/queue/cards.py",
        "        rows = rows.filter(project_id__in=projects)\n",
        '        rows = rows.filter(agent_name__in=__import__("runs.models").models.Agent.objects.filter(project_id__in=projects).values("name"))\n',
        ("tests/projects/test_archive_scoping.py",),
    ),
    Mutation(
        "i46 stream: a new id inside half-written arguments continues the call", "runs/engine/llm/stream.py",
        "        return renamed and name != named\n",
        "        return id_changed or (renamed and name != named)\n",
        ("tests/engine/llm/test_stream.py", "tests/engine/loop_contract/test_provider_streams.py"),
    ),
    Mutation(
        "i46 stream: a call keeps the id it began with", "runs/engine/llm/stream.py",
        "        if call_id and not call.id:\n",
        "        if call_id:\n",
        ("tests/engine/llm/test_stream.py", "tests/engine/loop_contract/test_provider_streams.py"),
    ),
    Mutation(
        "i46 errors: JSON under a script prefix too", "runs/web/views/errors.py",
        '    return request.path_info.startswith("/api/")  # under a script prefix too\n',
        '    return request.path.startswith("/api/")\n',
        ("tests/web/api/test_api_refusals.py::test_a_site_served_under_a_prefix_answers_its_apis_refusals_in_json_too",),
    ),
    Mutation(
        "i46 audit: the database refuses deleting an entry (SQLite)", "audit/migrations/0003_append_only_triggers.py",
        "    \"BEGIN SELECT RAISE(ABORT, 'audit entries are never deleted'); END\",\n",
        "    \"BEGIN SELECT 1; END\",\n",
        ("tests/audit/test_append_only_database.py",),
    ),
    Mutation(
        "i46 audit: the database refuses changing an entry (SQLite)", "audit/migrations/0003_append_only_triggers.py",
        "    \"BEGIN SELECT RAISE(ABORT, 'audit entries are never changed'); END\",\n",
        "    \"BEGIN SELECT 1; END\",\n",
        ("tests/audit/test_append_only_database.py",),
    ),
    Mutation(
        "i46 admin: only site administrators enter Django's admin", "projects/people.py",
        "    return user.is_active and user.is_staff and site_administrator(user)\n",
        "    return user.is_active and user.is_staff\n",
        ("tests/projects/test_admin_site.py",),
    ),
    Mutation(
        "i46 admin: the admin site asks admin_site_entry", "projects/admin.py",
        "admin.site.has_permission = admin_site_entry\n",
        "\n",
        ("tests/projects/test_admin_site.py",),
    ),
    Mutation(
        "i46 people: a project's admins manage its people, not its operators", "projects/people.py",
        "        project=project, user_id=user.pk, role__name=ADMINS).exists()\n",
        "        project=project, user_id=user.pk).exists()\n",
        ("tests/projects/test_project_people.py",),
    ),
    Mutation(
        "i46 people: another team's project is a 404", "projects/people.py",
        "    if project is None or not access.may_see(user, project.pk):\n",
        "    if project is None:\n",
        ("tests/projects/test_project_people.py",),
    ),
    Mutation(
        "i46 people: a project keeps its last admin", "projects/people.py",
        "    if membership.role.name == ADMINS and not Membership.objects.filter(\n",
        "    if False and not Membership.objects.filter(\n",
        ("tests/projects/test_project_people.py",),
    ),
    Mutation(
        "i46 chat identities: only people whose every project the admin manages", "projects/people.py",
        "    return bool(theirs) and theirs <= managed\n",
        "    return bool(theirs)\n",
        ("tests/projects/test_project_people.py",),
    ),
    Mutation(
        "i46 chat identities: nobody maps their own", "accounts/chat_identities.py",
        "    if person.pk == actor.pk:\n",
        "    if False:\n",
        ("tests/projects/test_project_people.py",),
    ),
    Mutation(
        "lease fence", "runs/engine/leases.py",
        '"WHERE id = %s AND lease_owner = %s RETURNING',
        '"WHERE id = %s AND (lease_owner = %s OR 1 = 1) RETURNING',
        (f"{FM}/test_stale_driver.py",),
    ),
    Mutation(
        "lease claim only when free", "runs/engine/leases.py",
        "\"AND (lease_owner = '' OR lease_expires_at < %s)\",",
        "\"AND (1 = 1 OR lease_expires_at < %s)\",",
        (f"{FM}/test_stale_driver.py::test_a_second_delivery_while_a_live_lease_is_held_drives_nothing",
         "tests/engine/workers/test_worker_durability.py::test_concurrent_run_advance_in_threads_drives_each_iteration_once"),
    ),
    Mutation(
        "approval decided only from pending", "runs/supervision/approvals/decide.py",
        "changed = Approval.objects.filter(only_if, pk=approval_id, status=Approval.Status.PENDING).update(**fields)",
        "changed = Approval.objects.filter(only_if, pk=approval_id).update(**fields)",
        ("tests/supervision/approvals/test_approval_race.py", "tests/supervision/approvals/test_decision_record.py",
         "tests/supervision/approvals/test_concurrent_decisions_http.py"),
    ),
    Mutation(
        "expiry only from pending", "runs/supervision/approvals/gate.py",
        "changed = Approval.objects.filter(pk=approval.pk, status=Approval.Status.PENDING).update(",
        "changed = Approval.objects.filter(pk=approval.pk).update(",
        ("tests/supervision/approvals/test_decision_record.py::test_the_loops_expiry_on_a_stale_read_keeps_a_decision_that_just_landed",
         "tests/supervision/approvals/test_decision_record.py::test_a_decision_is_final_for_people_and_for_expiry"),
    ),
    Mutation(
        "iteration cap before tools", "runs/engine/decisions.py",
        'if counters.iterations + 1 >= config["max_iterations"]:',
        'if counters.iterations + 1 > config["max_iterations"]:',
        (f"{LC}/test_limits.py::test_last_iteration_does_not_execute_tools",
         f"{LC}/test_limits.py::test_single_iteration_run_skips_all_requested_tools"),
    ),
    Mutation(
        "iteration cap before a request", "runs/engine/decisions.py",
        'if counters.iterations >= config["max_iterations"]:',
        'if counters.iterations > config["max_iterations"]:',
        (f"{LC}/test_limits.py::test_a_run_already_at_its_iteration_limit_asks_the_model_nothing_more",),
    ),
    Mutation(
        "repeat detection", "runs/engine/guards.py",
        'if counts[key] >= limits.get(call.tool_name, limits["*"]):',
        'if counts[key] > limits.get(call.tool_name, limits["*"]):',
        (f"{LC}/test_limits.py::test_reformatted_identical_calls_stop_the_run_at_the_repeat_limit",
         f"{LC}/test_limits.py::test_per_tool_repeat_limit_overrides_the_agent_limit",
         f"{LC}/test_limits.py::test_stuck_demo_task_ends_as_repeated_call"),
    ),
    Mutation(
        "schema validation before execution", "runs/engine/tools/execution.py",
        "error = validate_arguments(tools[tool_name].parameters, arguments, tools[tool_name].sensitive_fields)",
        "error = None",
        (f"{LC}/test_tool_calls.py::test_arguments_failing_the_schema_are_an_error_and_the_handler_never_runs",
         f"{LC}/test_tool_calls.py::test_demo_tool_schema_is_enforced"),
    ),
    Mutation(
        "approval gate for destructive calls", "runs/supervision/approvals/gate.py",
        "return approval_request(call=call, tool=tool, config=config, recorder=recorder) if tool.destructive else RUN",
        "return RUN",
        (f"{LC}/test_approvals.py::test_destructive_call_parks_the_run_until_someone_decides",
         f"{FM}/test_prompt_injection.py::test_an_injected_cancel_waits_for_a_person_and_a_rejection_changes_nothing"),
    ),
    Mutation(
        "a call left started goes to a person", "runs/supervision/approvals/gate.py",
        "        if tool.idempotent:\n            return RUN\n",
        "        if True:\n            return RUN\n",
        (f"{LC}/test_outcome_unknown.py::test_a_call_left_started_by_a_crash_waits_for_a_person_whatever_the_policy",),
    ),
    Mutation(
        "idempotency key is the call's place", "runs/engine/loop.py",
        "idempotency_key=guards.idempotency_key(run.pk, self.step_count, p.index),",
        "idempotency_key=p.call_id[:64],",
        (f"{LC}/test_idempotency.py",),
    ),
    Mutation(
        "idempotency key reused on a re-run", "runs/engine/tools/call_runner.py",
        "c.call_id, c.idempotency_key)",
        "c.call_id, c.idempotency_key + str(c.attempts))",
        ("tests/engine/workers/test_worker_durability.py::test_idempotent_call_left_started_is_run_again_once",
         f"{LC}/test_idempotency.py"),
    ),
    Mutation(
        "unseen-id check", "runs/supervision/rules/who_decides.py",
        "    if unseen_ids:\n        reasons.append(",
        "    if False:\n        reasons.append(",
        ("tests/supervision/approvals/test_approval_routing.py::test_an_unseen_identifier_stops_a_rule_and_the_note_says_why",
         "tests/supervision/rules/test_rules_in_loop.py::test_an_unseen_order_id_keeps_a_rule_from_approving_and_the_note_says_why",
         "tests/supervision/rules/test_rules_in_loop.py::test_the_approve_all_policy_does_not_approve_an_unseen_id"),
    ),
    Mutation(
        "outcome unknown when a call may have taken effect", "runs/engine/storage/records.py",
        "if call.may_have_taken_effect or call.pk in in_flight:",
        "if False:",
        (f"{LC}/test_outcome_unknown.py::test_an_internal_error_after_a_call_took_effect_records_its_outcome_as_unknown",
         f"{LC}/test_outcome_unknown.py::test_cancelling_a_run_whose_call_was_started_records_its_outcome_as_unknown"),
    ),
    Mutation(
        "an operator's stop wins over the run's own end", "runs/engine/storage/records.py",
        "    if not name:\n        return reason, detail\n    run.stop_requested_by_name = name",
        "    if True:\n        return reason, detail\n    run.stop_requested_by_name = name",
        ("tests/controls/test_levers.py::test_a_stop_asked_while_the_model_writes_its_final_answer_still_ends_the_run_as_stopped",),
    ),
    Mutation(
        "budget checked before each request", "runs/engine/decisions.py",
        "    if budget:\n        return budget\n",
        "    if False:\n        return budget\n",
        (f"{LC}/test_limits.py::test_a_run_whose_budget_is_already_spent_asks_the_model_nothing_more",
         f"{LC}/test_limits.py::test_budget_spent_across_iterations_stops_the_run",
         f"{LC}/test_limits.py::test_cost_budget_stops_the_run", f"{LC}/test_limits.py::test_token_budget_stops_the_run"),
    ),
    Mutation(
        "a model endpoint typed by a user goes through the outbound guard", "runs/engine/llm/clients.py",
        "guarded = bool(base_url) and base_url != settings.LLM_BASE_URL and not trusted",
        "guarded = False",
        ("tests/notifications/test_notifications.py::test_an_agent_endpoint_on_a_private_address_is_refused_before_any_request",
         "tests/notifications/test_notifications.py::test_an_agent_endpoint_whose_name_resolves_elsewhere_after_the_check_reaches_nothing"),
    ),
    Mutation(
        "an error inside a 200 answer is a model failure", "runs/engine/llm/completions.py",
        'if isinstance(choice, dict) and (choice.get("finish_reason") == "error" or choice.get("error")):',
        "if False:",
        (f"{LC}/test_provider_answers.py",),
    ),
    Mutation(
        "unpaired surrogates and NUL replaced where answers are read", "runs/engine/llm/answers.py",
        "    return _ODD.subn(REPLACEMENT, text)",
        "    return text, 0",
        (f"{LC}/test_provider_answers.py",),
    ),
    Mutation(
        "a role counts in its own project only", "projects/backends.py",
        "            return set(perms.get(scope, ()))",
        "            return set().union(*perms.values())",
        ("tests/projects/test_roles_per_project.py",),
    ),
    Mutation(
        "a renamed voter is still the same voter", "runs/supervision/approvals/checks.py",
        "Q(user_name=user.get_username()) | Q(user=user), approval=approval",
        "Q(user_name=user.get_username()), approval=approval",
        ("tests/supervision/approvals/test_decide_edits_votes.py::test_a_person_renamed_after_voting_cannot_approve_the_same_call_again",),
    ),
    Mutation(
        "a chat click signed in the future is refused", "runs/supervision/chat/clicks.py",
        "    if -age > settings.SLACK_MAX_AGE_SECONDS:",
        "    if False:",
        ("tests/supervision/chat/test_chat_decisions.py::test_a_click_signed_in_the_future_is_refused_and_decides_nothing",),
    ),
    Mutation(
        "a result is read back from the run's own calls only", "toolsapp/builtin/results.py",
        "calls = ToolCall.objects.filter(run_id=ctx.run_id, call_id=call_id)",
        "calls = ToolCall.objects.filter(call_id=call_id)",
        (f"{LC}/test_read_back.py",),
    ),
    Mutation(
        "a budget's day starts at the start of the day", "runs/controls/budgets.py",
        "    return day_start(day if period == Budget.Period.DAY else day.replace(day=1))",
        "    return day_start(day.fromordinal(day.toordinal() - 1) if period == Budget.Period.DAY else day.replace(day=1))",
        ("tests/controls/test_budgets.py::test_a_period_starts_at_the_beginning_of_its_own_day_and_month_at_any_hour",
         "tests/controls/test_budgets.py::test_a_new_run_of_a_spent_budget_waits_queued_and_starts_when_the_period_turns"),
    ),
    # --- projects, budgets, quorum, chat, experiments and memory (issue 46) ---------------------
    Mutation(
        "projects: a token limited to a project sees that project only", "projects/access.py",
        "return {pk: p for pk, p in user._projects_all.items() if limit is None or pk == limit}",
        "return dict(user._projects_all)",
        ("tests/projects/test_token_limits.py",),
    ),
    Mutation(
        "projects: lists are cut to the person's projects", "projects/access.py",
        "        wanted |= Q(**{f\"{field}__isnull\": True})\n    return queryset.filter(wanted)",
        "        wanted |= Q(**{f\"{field}__isnull\": True})\n    return queryset",
        ("tests/projects/test_runs_scoping.py::test_pages_and_api_show_an_operator_their_projects_runs_and_approvals_only",
         "tests/projects/test_tools_scoping.py::test_the_tools_page_lists_the_shared_tools_and_the_persons_projects_with_their_project"),
    ),
    Mutation(
        "projects: what the site shares is changed by site roles only", "projects/access.py",
        "return not token_limited(user) and (user.is_superuser or perm in site_perms(user))",
        "return not token_limited(user)",
        ("tests/projects/test_tools_scoping.py::test_a_project_admin_cannot_change_a_shared_tool_or_server",),
    ),
    Mutation(
        "projects: a permission holds where the role gives it", "projects/access.py",
        "return {pk for pk, perms in project_perms(user).items() if perm in perms}",
        "return set(project_perms(user))",
        ("tests/projects/test_runs_scoping.py::test_an_operator_decides_only_where_their_role_decides",
         "tests/projects/test_roles_per_project.py"),
    ),
    Mutation(
        "projects: has_perm on a thing asks its own project", "projects/backends.py",
        "return set(perms.get(project_id, ())) | access.site_perms(user_obj)",
        "return set().union(*perms.values()) | access.site_perms(user_obj)",
        ("tests/projects/test_roles_per_project.py", "tests/projects/test_runs_scoping.py",
         "tests/projects/test_tools_scoping.py"),
    ),
    Mutation(
        "projects: a shared thing's route gives members view rights only", "projects/backends.py",
        "return {p for p in set().union(*perms.values()) if p.split(\".\", 1)[1].startswith(\"view_\")}",
        "return set().union(*perms.values())",
        ("tests/projects/test_tools_scoping.py::test_a_shared_tools_page_offers_its_edit_button_to_site_admins_only",),
    ),
    Mutation(
        "projects: a route naming another project's thing is a 404", "projects/routes.py",
        "        if not access.may_see(user, project_id):\n",
        "        if False:\n",
        ("tests/projects/test_route_scoping.py::test_people_of_another_project_get_404_for_every_route_naming_a_thing",
         "tests/projects/test_route_scoping.py::test_a_thing_of_another_project_under_ones_own_is_as_if_it_did_not_exist"),
    ),
    Mutation(
        "budgets: a budget covers its own project's runs only", "runs/controls/budgets.py",
        "    if budget.project_id != _project_of(run):\n        return False\n",
        "    if False:\n        return False\n",
        ("tests/projects/test_runs_scoping.py::test_a_rule_budget_and_webhook_of_one_project_never_touch_anothers_runs",
         "tests/controls/test_budgets.py"),
    ),
    Mutation(
        "budgets: a budget holds at its limit, not after", "runs/controls/budgets.py",
        "        if used[budget.pk] >= limit:",
        "        if used[budget.pk] > limit:",
        ("tests/controls/test_budgets.py",),
    ),
    Mutation(
        "budgets: experiments are never held", "runs/controls/budgets.py",
        "    if run.experiment:\n        return None\n    return _spent_confirmed(",
        "    if False:\n        return None\n    return _spent_confirmed(",
        ("tests/controls/test_budgets.py::test_experiments_are_not_counted_and_not_held",),
    ),
    Mutation(
        "budgets: a raise for one run lifts that run's limit only", "runs/controls/budgets.py",
        "if r.budget_id == budget.pk and r.until > now and (r.run_id is None or r.run_id == run_id)]",
        "if r.budget_id == budget.pk and r.until > now]",
        ("tests/controls/test_budgets.py",),
    ),
    # Not listed: budget_requests.budget_raise's `holds.filter(run_id=run_id)` (a raise for one run
    # looks at that run's hold only). Without it every held run of the budget is looked at, and
    # each is checked with reached(), whose limit_for counts a run's raise for that run only: the
    # others stay held. A shortcut, not a guard; no test can tell it is gone.
    Mutation(
        "budgets: a raise must lift the limit", "runs/controls/budget_requests.py",
        "if not (limit > budget.limit) or",
        "if not (limit >= 0) or",
        ("tests/controls/test_budgets.py",),
    ),
    Mutation(
        "quorum: every named group is covered", "runs/supervision/approvals/quorum.py",
        "return len(voters) >= required and not groups_uncovered(group_ids, voters)",
        "return len(voters) >= required",
        ("tests/supervision/approvals/test_quorum.py",),
    ),
    Mutation(
        "quorum: one person covers one group", "runs/supervision/approvals/quorum.py",
        "if voter not in group_of or cover(group_of[voter], tried):",
        "if True:",
        ("tests/supervision/approvals/test_quorum.py",),
    ),
    Mutation(
        "quorum: votes for replaced arguments do not count", "runs/supervision/approvals/quorum.py",
        "ApprovalVote.objects.filter(approval_id=approval_id, superseded_at__isnull=True)",
        "ApprovalVote.objects.filter(approval_id=approval_id)",
        ("tests/supervision/approvals/test_quorum.py::test_an_approval_of_arguments_an_edit_replaced_does_not_count_toward_the_quorum",
         "tests/supervision/approvals/test_decide_edits_votes.py"),
    ),
    Mutation(
        "checks: the launcher may not approve a two-person call", "runs/supervision/approvals/checks.py",
        "    if approval.run.created_by_id == user.pk:\n",
        "    if False:\n",
        ("tests/supervision/approvals/test_quorum.py::test_people_outside_the_groups_the_launcher_and_second_votes_are_refused",
         "tests/supervision/chat/test_chat_decisions.py::test_the_queue_rules_hold_in_chat_a_named_group_and_the_launcher"),
    ),
    Mutation(
        "checks: only a named group's members decide", "runs/supervision/approvals/checks.py",
        "if approval.group_id and not user.is_superuser and not user.groups.filter(pk=approval.group_id).exists():",
        "if False:",
        ("tests/supervision/chat/test_chat_decisions.py::test_the_queue_rules_hold_in_chat_a_named_group_and_the_launcher",
         "tests/supervision/approvals/test_approval_routing.py"),
    ),
    Mutation(
        "checks: a quorum's deciders are of its groups", "runs/supervision/approvals/checks.py",
        "if quorum and not user.is_superuser and not user.groups.filter(pk__in=quorum).exists():",
        "if False:",
        ("tests/supervision/approvals/test_quorum.py",),
    ),
    Mutation(
        "checks: one approval per person for the same arguments", "runs/supervision/approvals/checks.py",
        "if approve and approval.required_approvals > 1 and not restart and voted(approval=approval, user=user):",
        "if False:",
        ("tests/supervision/approvals/test_decide_edits_votes.py", "tests/supervision/approvals/test_quorum.py"),
    ),
    Mutation(
        "checks: a proposed edit is approved by its hash only", "runs/supervision/approvals/checks.py",
        "        if seen_hash != approval.edited_args_hash:\n",
        "        if False:\n",
        ("tests/supervision/approvals/test_decide_edits_votes.py",),
    ),
    Mutation(
        "chat: a click's signature is checked", "runs/supervision/chat/clicks.py",
        "    if not signature_valid(body=body, timestamp=timestamp, signature=signature, secret=secret):\n",
        "    if False:\n",
        ("tests/supervision/chat/test_chat_decisions.py::test_bad_clicks_are_refused_recorded_and_decide_nothing",),
    ),
    Mutation(
        "chat: an old click is refused", "runs/supervision/chat/clicks.py",
        "    if age > settings.SLACK_MAX_AGE_SECONDS:\n",
        "    if False:\n",
        ("tests/supervision/chat/test_chat_decisions.py::test_bad_clicks_are_refused_recorded_and_decide_nothing",),
    ),
    Mutation(
        "chat: a click of a deactivated account decides nothing", "runs/supervision/chat/clicks.py",
        "if identity is None or not identity.user.is_active:",
        "if identity is None:",
        # The permission check after it refuses a deactivated account too (it has no permission):
        # what this line adds is the refusal's words, which the test reads.
        ("tests/supervision/chat/test_chat_decisions.py::test_a_click_of_a_member_whose_account_was_deactivated_decides_nothing",),
    ),
    Mutation(
        "chat: a person without the decide permission decides nothing", "runs/supervision/chat/clicks.py",
        "        if not user.has_perm(PERM_DECIDE):\n",
        "        if False:\n",
        ("tests/supervision/chat/test_chat_decisions.py",),
    ),
    Mutation(
        "chat: a message is claimed before it is posted", "runs/supervision/chat/messages.py",
        "if not ChatMessage.objects.filter(claimable, pk=message_id).update(",
        "if not ChatMessage.objects.filter(pk=message_id).update(",
        ("tests/supervision/chat/test_chat_decisions.py::test_a_message_is_posted_once_however_often_it_is_sent",),
    ),
    Mutation(
        "experiments: a destructive tool is always simulated", "runs/engine/tools/simulation.py",
        "    if tool.destructive:\n        return True\n",
        "    if False:\n        return True\n",
        ("tests/evals/test_simulated_experiments.py", "tests/evals/test_experiment_flag.py"),
    ),
    Mutation(
        "experiments: a destructive tool cannot be set to run for real", "toolsapp/services.py",
        "elif values[\"in_experiments\"] == \"real\" and values[\"destructive\"] is True:",
        "elif False:",
        ("tests/evals/test_api.py", "tests/evals/test_experiment_flag.py"),
    ),
    Mutation(
        "experiments: raising a version's limits needs the right to change agents", "runs/lifecycle/experiment_runs.py",
        "    if user is not None and not user.has_perm(PERM_MANAGE_AGENTS):\n",
        "    if False:\n",
        ("tests/evals/test_api.py", "tests/evals/test_pages.py", "tests/projects/test_evals_scoping.py"),
    ),
    Mutation(
        "memory: an experiment's search records no read", "memory/services.py",
        "    if found and not experiment:\n",
        "    if found:\n",
        ("tests/memory/test_save_and_recall.py::test_an_experiments_search_finds_facts_and_records_no_read",),
    ),
    Mutation(
        "memory: a search finds the run's customer's facts only", "memory/services.py",
        "memory_search(memories=Memory.objects.filter(agent_id=agent_id, customer=customer), query=query)",
        "memory_search(memories=Memory.objects.filter(agent_id=agent_id), query=query)",
        ("tests/memory/test_save_and_recall.py", "tests/memory/test_memory_in_the_loop.py"),
    ),
    Mutation(
        "memory: a full scope refuses a new fact", "memory/services.py",
        "        if scope.count() >= limit:\n",
        "        if scope.count() > limit:\n",
        ("tests/memory/test_save_and_recall.py",),
    ),
    Mutation(
        "memory: a fact is corrected under its own agent only", "memory/views.py",
        "pk=pk, agent_id=agent_id)\n    form = MemoryEditForm(",
        "pk=pk)\n    form = MemoryEditForm(",
        ("tests/memory/test_memory_pages.py",),
    ),
    Mutation(
        "memory: a fact is deleted under its own agent only", "memory/views.py",
        "pk=pk, agent_id=agent_id)\n    if request.method == \"POST\":\n        memory_delete(",
        "pk=pk)\n    if request.method == \"POST\":\n        memory_delete(",
        ("tests/memory/test_memory_pages.py",),
    ),
    Mutation(
        "memory: reading memories needs its own permission", "memory/views.py",
        "@permission_required((PERM_VIEW_MEMORY, PERM_VIEW_AGENT), raise_exception=True)",
        "@permission_required((PERM_VIEW_AGENT,), raise_exception=True)",
        ("tests/memory/test_memory_pages.py::test_a_role_that_sees_agents_but_not_their_memories_may_not_read_them",
         "tests/memory/test_memory_pages.py::test_a_person_without_a_role_may_not_read_them"),
    ),
]


def tree_copy(destination: Path) -> None:
    """The checkout's files as git sees them (committed or not, ignored ones left out), with the venv linked."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if name == ".venv" or name.startswith(".venv/") or not source.is_file():
            continue
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    (destination / ".venv").symlink_to((ROOT / ".venv").resolve())


def run_tests(tree: Path, tests: tuple[str, ...]) -> tuple[bool, str, float]:
    """(all passed, the failing tests' names or the error's last line, seconds)."""
    started = time.monotonic()
    done = subprocess.run(
        [str(tree / ".venv/bin/python"), "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:randomly",
         *tests],
        cwd=tree, capture_output=True, text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    # The summary's "FAILED path::test - reason" lines (not captured log lines that start with ERROR).
    failed = [line.split(" ", 1)[1].split(" - ")[0] for line in done.stdout.splitlines()
              if line.startswith(("FAILED ", "ERROR ")) and "::" in line.split(" - ")[0]]
    tail = (done.stdout.strip().splitlines() or [""])[-1]
    return done.returncode == 0, ", ".join(failed) or tail, time.monotonic() - started


def check(mutations: list[Mutation]) -> int:
    rows, missed, broken_baseline = [], 0, False
    baselines: dict[tuple[str, ...], tuple[bool, str, float]] = {}  # tests shared by several mutations run once
    with tempfile.TemporaryDirectory(prefix="mutation-check-") as folder:
        tree = Path(folder)
        tree_copy(tree)
        for number, mutation in enumerate(mutations, 1):
            path = tree / mutation.path
            text = path.read_text()
            found = text.count(mutation.original)
            if found != 1:
                rows.append((number, mutation, f"snippet found {found} times", "", 0.0))
                broken_baseline = True
                continue
            if mutation.tests not in baselines:
                baselines[mutation.tests] = run_tests(tree, mutation.tests)
            passed, detail, seconds = baselines[mutation.tests]
            if not passed:
                rows.append((number, mutation, "baseline failed", detail, seconds))
                broken_baseline = True
                continue
            try:
                path.write_text(text.replace(mutation.original, mutation.broken))
                passed, detail, more = run_tests(tree, mutation.tests)
            finally:
                path.write_text(text)
            missed += passed
            rows.append((number, mutation, "MISSED" if passed else "caught", "" if passed else detail, seconds + more))
            print(f"{number:2} {rows[-1][2]:8} {mutation.name}", file=sys.stderr, flush=True)
    print_table(rows)
    return 2 if broken_baseline else 1 if missed else 0


def print_table(rows) -> None:
    print("| # | guarantee | file | broken line | result | first failing test | s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for number, mutation, result, detail, seconds in rows:
        broken = mutation.broken.strip().replace("\n", " ⏎ ").replace("|", "\\|")
        first = detail.split(", ")[0].replace("|", "\\|") if detail else ""
        print(f"| {number} | {mutation.name} | `{mutation.path}` | `{broken[:70]}` | {result} | {first} | {seconds:.0f} |")
    caught = sum(1 for row in rows if row[2] == "caught")
    print(f"\n{caught} of {len(rows)} breaks caught "
          f"(database: {'PostgreSQL' if os.environ.get('DATABASE_URL', '').startswith('postgres') else 'SQLite'})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", help="names (or parts of names) of the mutations to check")
    parser.add_argument("--list", action="store_true", help="list the mutations and their tests, run nothing")
    options = parser.parse_args()
    chosen = [m for m in MUTATIONS if not options.only or any(part in m.name for part in options.only)]
    if options.list:
        for mutation in chosen:
            print(f"{mutation.name}: {mutation.path}\n    {' '.join(mutation.tests)}")
        return 0
    return check(chosen)


if __name__ == "__main__":
    sys.exit(main())
