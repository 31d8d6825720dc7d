"""Chat identities, mapped from a project's card on the projects page; a person's API tokens."""
from django.urls import path

from accounts import token_views, views

urlpatterns = [
    path("projects/chat-identities/add/", views.chat_identity_add, name="chat_identity_add"),
    path("projects/chat-identities/remove/", views.chat_identity_remove, name="chat_identity_remove"),
    path("account/tokens/", token_views.api_tokens, name="api_tokens"),
    path("account/tokens/<int:pk>/revoke/", token_views.api_token_revoke, name="api_token_revoke"),
]
