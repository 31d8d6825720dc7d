from django.urls import path

from toolsapp import views

urlpatterns = [
    path("", views.tool_list, name="tool_list"),
    path("new/", views.tool_create, name="tool_create"),
    path("<int:pk>/", views.tool_detail, name="tool_detail"),
    path("<int:pk>/edit/", views.tool_edit, name="tool_edit"),
]
