import json
import os

from django.db import router, transaction
from jwcrypto import jwt
from oauth2_provider.models import IDToken
from oauth2_provider.oauth2_validators import OAuth2Validator


def quirks() -> dict:
    """What a test asks the provider to do differently, read afresh for every token: a JSON file
    (OP_QUIRKS_FILE) the test writes, as a real provider's odd or hostile answers would be."""
    path = os.environ.get("OP_QUIRKS_FILE", "")
    if not path or not os.path.exists(path):
        return {}
    with open(path) as file:
        return json.load(file)


class GroupsValidator(OAuth2Validator):
    """Sends the person's username, e-mail and group names (the `groups` claim) in the ID token
    and from the userinfo endpoint. Quirks: "id_token_claims" (set or replace claims of the ID
    token, e.g. "aud" and "azp"), "preferred_username" (instead of the username), "no_kid" (an
    ID token header without the key's id)."""

    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": "openid"}

    def get_additional_claims(self, request):
        user = request.user
        return {
            "preferred_username": quirks().get("preferred_username") or user.username,
            "email": user.email,
            "groups": sorted(group.name for group in user.groups.all()),
        }

    def get_id_token_dictionary(self, token, token_handler, request):
        claims, expiration_time = super().get_id_token_dictionary(token, token_handler, request)
        claims.update(quirks().get("id_token_claims", {}))
        return claims, expiration_time

    def finalize_id_token(self, id_token, token, token_handler, request):
        if not quirks().get("no_kid"):
            return super().finalize_id_token(id_token, token, token_handler, request)
        # django-oauth-toolkit's own, without "kid" in the header (it always sends one).
        claims, expiration_time = self.get_id_token_dictionary(token, token_handler, request)
        id_token.update(**claims)
        if "nonce" not in id_token and request.nonce:
            id_token["nonce"] = request.nonce
        header = {"typ": "JWT", "alg": request.client.algorithm}
        signed = jwt.JWT(header=json.dumps(header), claims=json.dumps(id_token, default=str))
        signed.make_signed_token(request.client.jwk_key)
        with transaction.atomic(using=router.db_for_write(IDToken)):
            saved = self._save_id_token(id_token["jti"], request, expiration_time)
        request.access_token = saved
        request.id_token = saved
        return signed.serialize()
