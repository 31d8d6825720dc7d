import json

from django.contrib.auth.views import LoginView
from django.urls import include, path
from jwcrypto import jwk
from oauth2_provider.views import JwksInfoView

from tests.accounts.oidc_provider.validator import quirks

_EXTRA_KEY = jwk.JWK.generate(kty="RSA", size=2048)


def jwks(request):
    """The provider's key set; with the "second_key" quirk one more signing key (as during a key
    rotation), which signs nothing."""
    response = JwksInfoView.as_view()(request)
    if quirks().get("second_key"):
        keys = json.loads(response.content)["keys"]
        extra = {"alg": "RS256", "use": "sig", "kid": _EXTRA_KEY.thumbprint(), **json.loads(_EXTRA_KEY.export_public())}
        response.content = json.dumps({"keys": [*keys, extra]})
    return response


urlpatterns = [
    path("o/.well-known/jwks.json", jwks),
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    path("accounts/login/", LoginView.as_view(), name="login"),
]
