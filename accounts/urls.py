"""Chat identities, mapped from a project's card on the projects page."""
from django.urls import path

from accounts import views

urlpatterns = [
    path("projects/chat-identities/add/", views.chat_identity_add, name="chat_identity_add"),
    path("projects/chat-identities/remove/", views.chat_identity_remove, name="chat_identity_remove"),
]
