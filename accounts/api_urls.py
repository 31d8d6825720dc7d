from django.urls import path

from accounts import api

urlpatterns = [
    path("token/", api.TokenView.as_view(), name="api-token"),
    path("tokens/", api.TokenListView.as_view(), name="api-token-list"),
    path("tokens/<int:pk>/revoke/", api.TokenRevokeView.as_view(), name="api-token-revoke"),
]
