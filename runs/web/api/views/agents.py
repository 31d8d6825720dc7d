"""Agents: created and changed through agent_save (in AgentSerializer), like the dashboard's editor."""
from django.db.models import ProtectedError

from runs.models import Agent
from runs.roles import PERM_ADD_AGENT, PERM_DELETE_AGENT, PERM_MANAGE_AGENTS, PERM_VIEW_AGENT
from runs.web.api import serializers as api
from runs.web.api.errors import Conflict
from runs.web.api.views.base import CrudViewSet, _crud_schema


@_crud_schema("Agent", api.AgentSerializer)
class AgentViewSet(CrudViewSet):
    queryset = Agent.objects.prefetch_related("tools").order_by("name")
    serializer_class = api.AgentSerializer
    view_perm, manage_perm, add_perm, delete_perm = PERM_VIEW_AGENT, PERM_MANAGE_AGENTS, PERM_ADD_AGENT, PERM_DELETE_AGENT

    def perform_destroy(self, instance):
        try:
            instance.delete()
        except ProtectedError:
            raise Conflict(f"Agent {instance.name} has runs, so it cannot be deleted (runs keep their agent).")
