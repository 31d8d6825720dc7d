"""The checks single sign-on adds to mozilla-django-oidc's, as plain functions over the provider's
data: which key signed an ID token, whether the token is for this client and from the issuer, and
whether the authorization response came from that issuer (RFC 9207). Each refusal is a TokenRefused
with a sentence for the sign-in page.
"""

from collections.abc import Mapping

from django.core.exceptions import SuspiciousOperation

ANOTHER_CLIENT = "the identity provider's ID token was issued to another application"
ANOTHER_ISSUER = "the identity provider's ID token comes from another issuer"
WHICH_KEY = "the ID token does not say which of the provider's keys signed it"
UNKNOWN_KEY = "the ID token was signed with a key the identity provider does not list"
WRONG_RESPONDER = "the answer did not come from the identity provider this site uses"
NO_ISSUER = "single sign-on is not fully set up here: the provider's issuer is unknown (set OIDC_OP_ISSUER)"


class TokenRefused(SuspiciousOperation):
    """Why the provider's answer is refused, in words for the sign-in page."""


def signing_key(jwks: Mapping, header: Mapping) -> dict:
    """The key of the provider's set that signed a token with this header.

    A token names its key (`kid`); one that does not can only be checked when exactly one key of
    the set fits its algorithm (OIDC Core 10.1: a kid is needed only when there are several).
    """
    algorithm = header.get("alg")
    keys = [
        key
        for key in (jwks.get("keys") or [])
        if isinstance(key, Mapping) and key.get("use", "sig") == "sig" and key.get("alg", algorithm) == algorithm
    ]
    if "kid" not in header:
        if len(keys) != 1:
            raise TokenRefused(WHICH_KEY)
        return dict(keys[0])
    named = [key for key in keys if key.get("kid") == header["kid"]]
    if len(named) != 1:
        raise TokenRefused(UNKNOWN_KEY)
    return dict(named[0])


def check_id_token(payload: Mapping, *, client_id: str, issuer: str) -> None:
    """OIDC Core 3.1.3.7, steps 2-5: from the issuer, for this client, and when the token names
    several audiences or an authorized party (azp), that party is this client."""
    if not issuer:
        raise TokenRefused(NO_ISSUER)
    if payload.get("iss") != issuer:
        raise TokenRefused(ANOTHER_ISSUER)
    audience = payload.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    if client_id not in audiences:
        raise TokenRefused(ANOTHER_CLIENT)
    azp = payload.get("azp")
    if (len(audiences) > 1 and azp is None) or (azp is not None and azp != client_id):
        raise TokenRefused(ANOTHER_CLIENT)


def response_issuer_refusal(*, given: str | None, issuer: str, advertised: bool) -> str | None:
    """RFC 9207 2.4: None when the authorization response's `iss` parameter may be accepted, else
    why not. When present it must be the issuer, exactly; when the provider advertises it
    (authorization_response_iss_parameter_supported) it must be present."""
    if given is None:
        return WRONG_RESPONDER if advertised else None
    if not issuer:
        return NO_ISSUER
    return None if given == issuer else WRONG_RESPONDER
