from django.urls import path

from runs.web.consumers.approvals import ApprovalsConsumer
from runs.web.consumers.run_timeline import RunTimelineConsumer

websocket_urlpatterns = [
    path("ws/runs/<int:run_id>/", RunTimelineConsumer.as_asgi()),
    path("ws/approvals/", ApprovalsConsumer.as_asgi()),
]
