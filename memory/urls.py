from django.urls import path

from memory import views

urlpatterns = [
    path("agents/<int:agent_id>/memories/", views.memory_list, name="agent_memories"),
    path("agents/<int:agent_id>/memories/<int:pk>/edit/", views.memory_edit, name="memory_edit"),
    path("agents/<int:agent_id>/memories/<int:pk>/delete/", views.memory_delete_view, name="memory_delete"),
]
