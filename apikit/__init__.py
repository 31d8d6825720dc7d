"""The REST API's shared parts, for every app's endpoints (runs.web.api, evals.api): base views
with their per-method permissions, strict input, shared fields, error answers, OpenAPI helpers
and paging.

It imports Django, DRF, drf-spectacular and projects (who sees what), nothing of the apps
(.importlinter), save hosting.text, a leaf of plain text checks (what the database cannot store,
JSON nested too deeply). What is the site's own the settings name (agentsite/settings.py's
REST_FRAMEWORK): the authentication (accounts' API tokens, then the session) and the exception
handler (runs/web/api/errors.py: a lost database connection, Django's request limits, then
apikit.errors.answer_with_detail).
"""
