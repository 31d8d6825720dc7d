"""Grants for one run: listed with the run, revoked by anyone who may decide approvals."""
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from apikit.schema import errors
from apikit.views import ApiView
from runs.engine.storage.snapshots import grant_brief
from runs.models import Run, RunGrant
from runs.roles import PERM_DECIDE, PERM_VIEW
from runs.supervision.approvals.grants import grant_revoke, grants_of_run
from runs.web.api import serializers as api


class RunGrantListView(ApiView):
    required_perms = {"GET": (PERM_VIEW,)}

    @extend_schema(operation_id="runs_grants", summary="A run's grants, oldest first, revoked ones included",
                   responses={200: api.GrantListSerializer, **errors(404)})
    def get(self, request, pk: int):
        if not Run.objects.filter(pk=pk).exists():
            raise NotFound("No such run.")
        return Response({"results": [grant_brief(grant) for grant in grants_of_run(pk)]})


class GrantRevokeView(ApiView):
    required_perms = {"POST": (PERM_DECIDE,)}
    takes_no_body = True

    @extend_schema(operation_id="grants_revoke", request=None, responses={200: api.GrantResultSerializer, **errors(404)},
                   summary="Revoke a grant: the run's next such call goes to a person again",
                   description="Revoking a revoked grant changes nothing and names who revoked it first.")
    def post(self, request, pk: int):
        try:
            grant = grant_revoke(grant_id=pk, user=request.user)
        except RunGrant.DoesNotExist:
            raise NotFound("No such grant.")
        scope = f"identical {grant.tool_name} calls" if grant.args_hash else f"every {grant.tool_name} call"
        text = f"Revoked the grant of {scope} in run {grant.run_id}"
        text += f" (by {grant.revoked_by_name})." if grant.revoked_by_name != request.user.get_username() else "."
        return Response({"detail": text, "grant": grant_brief(grant)})
