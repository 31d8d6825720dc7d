"""Agents: created and changed through agent_save (in AgentSerializer), like the dashboard's editor."""
from django.db.models import ProtectedError
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import action
from rest_framework.response import Response

from apikit.errors import Conflict
from apikit.fields import service_errors
from apikit.schema import errors
from apikit.views import CrudViewSet, crud_schema
from runs.lifecycle.agent_versions import VersionNotFound
from runs.lifecycle.agents import InvalidAgent, agent_draft_save, version_make_current
from runs.models import Agent, AgentVersion
from runs.roles import PERM_ADD_AGENT, PERM_DELETE_AGENT, PERM_MANAGE_AGENTS, PERM_VIEW_AGENT
from runs.web.api import serializers as api
from runs.web.api.serializers.agents import AgentVersionSerializer


@crud_schema("Agent", api.AgentSerializer)
class AgentViewSet(CrudViewSet):
    queryset = Agent.objects.select_related("project").prefetch_related("tools").order_by("name")
    serializer_class = api.AgentSerializer
    view_perm, manage_perm, add_perm, delete_perm = PERM_VIEW_AGENT, PERM_MANAGE_AGENTS, PERM_ADD_AGENT, PERM_DELETE_AGENT

    def perform_destroy(self, instance):
        try:
            instance.delete()
        except ProtectedError:
            raise Conflict(f"Agent {instance.name} has runs, so it cannot be deleted (runs keep their agent).")


    @extend_schema(summary="The versions of an agent, newest first (drafts included)",
                   responses={200: AgentVersionSerializer(many=True), **errors(404)})
    @action(detail=True, methods=["get"])
    def versions(self, request, pk=None):
        agent = self.get_object()
        rows = AgentVersion.objects.filter(agent=agent).select_related("agent").order_by("-number")
        return self.get_paginated_response(AgentVersionSerializer(self.paginate_queryset(rows), many=True).data)

    @extend_schema(summary="Save a draft version: the agent's settings with these changed, not current (admins)",
                   request=api.AgentSerializer, responses={201: AgentVersionSerializer, **errors(400, 404)})
    @action(detail=True, methods=["post"])
    def draft(self, request, pk=None):
        agent = self.get_object()
        serializer = self.get_serializer(agent, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        version = agent_draft_save(agent=agent, data=serializer.validated_data, user=request.user)
        return Response(AgentVersionSerializer(version).data, status=201)

    @extend_schema(summary="Make a version (a draft, or an older one) current: a new version with its settings",
                   request=None, responses={200: AgentVersionSerializer, **errors(400, 404)})
    @action(detail=True, methods=["post"], url_path=r"versions/(?P<number>\d+)/make-current")
    def make_current(self, request, pk=None, number=None):
        agent = self.get_object()
        try:
            version = version_make_current(agent=agent, number=int(number), user=request.user)
        except VersionNotFound as exc:
            raise Http404(str(exc)) from exc
        except InvalidAgent as exc:
            raise service_errors(exc.errors) from exc
        return Response(AgentVersionSerializer(version).data)
