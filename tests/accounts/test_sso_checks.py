"""The checks single sign-on adds to the library's, as plain functions (accounts/sso_checks.py)."""

import pytest

from accounts.sso_checks import (
    ANOTHER_CLIENT,
    ANOTHER_ISSUER,
    NO_ISSUER,
    UNKNOWN_KEY,
    WHICH_KEY,
    WRONG_RESPONDER,
    TokenRefused,
    check_id_token,
    response_issuer_refusal,
    signing_key,
)

ISSUER, CLIENT = "https://idp.example.com", "agentsite"
ONE = {"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig", "n": "...", "e": "AQAB"}
TWO = {**ONE, "kid": "k2"}
ENCRYPTION = {**ONE, "kid": "e1", "use": "enc"}


def test_a_token_naming_its_key_gets_that_key():
    assert signing_key({"keys": [ONE, TWO]}, {"alg": "RS256", "kid": "k2"})["kid"] == "k2"


def test_a_token_without_a_kid_gets_the_only_signing_key():
    assert signing_key({"keys": [ONE, ENCRYPTION]}, {"alg": "RS256"})["kid"] == "k1"
    assert signing_key({"keys": [{k: v for k, v in ONE.items() if k != "kid"}]}, {"alg": "RS256"})["e"] == "AQAB"


@pytest.mark.parametrize(
    ("keys", "header", "why"),
    [
        ([ONE, TWO], {"alg": "RS256"}, WHICH_KEY),
        ([], {"alg": "RS256"}, WHICH_KEY),
        ([{**ONE, "alg": "ES256"}], {"alg": "RS256"}, WHICH_KEY),
        ([ONE], {"alg": "RS256", "kid": "k9"}, UNKNOWN_KEY),
        ([{k: v for k, v in ONE.items() if k != "kid"}], {"alg": "RS256", "kid": "k1"}, UNKNOWN_KEY),
    ],
)
def test_a_key_that_cannot_be_told_is_refused_in_words(keys, header, why):
    with pytest.raises(TokenRefused, match=why):
        signing_key({"keys": keys}, header)


def payload(**claims):
    return {"iss": ISSUER, "aud": CLIENT, "sub": "u-1", **claims}


@pytest.mark.parametrize(
    "claims",
    [{}, {"aud": [CLIENT]}, {"azp": CLIENT}, {"aud": [CLIENT, "other"], "azp": CLIENT}],
)
def test_a_token_for_this_client_from_the_issuer_passes(claims):
    check_id_token(payload(**claims), client_id=CLIENT, issuer=ISSUER)


@pytest.mark.parametrize(
    ("claims", "issuer", "why"),
    [
        ({"aud": "other"}, ISSUER, ANOTHER_CLIENT),
        ({"aud": ["other", "third"], "azp": CLIENT}, ISSUER, ANOTHER_CLIENT),
        ({"aud": [CLIENT, "other"]}, ISSUER, ANOTHER_CLIENT),
        ({"aud": [CLIENT, "other"], "azp": "other"}, ISSUER, ANOTHER_CLIENT),
        ({"azp": "other"}, ISSUER, ANOTHER_CLIENT),
        ({"iss": "https://evil.example"}, ISSUER, ANOTHER_ISSUER),
        ({}, "", NO_ISSUER),
    ],
)
def test_a_token_for_another_client_or_issuer_or_with_no_issuer_known_is_refused(claims, issuer, why):
    with pytest.raises(TokenRefused) as refused:
        check_id_token(payload(**claims), client_id=CLIENT, issuer=issuer)
    assert str(refused.value) == why


@pytest.mark.parametrize(
    ("given", "advertised", "expected"),
    [
        (ISSUER, True, None),
        (ISSUER, False, None),
        (None, False, None),
        (None, True, WRONG_RESPONDER),
        ("https://evil.example", False, WRONG_RESPONDER),
        (ISSUER + "/", True, WRONG_RESPONDER),  # RFC 9207: compared as strings, exactly
    ],
)
def test_the_authorization_responses_iss_parameter(given, advertised, expected):
    assert response_issuer_refusal(given=given, issuer=ISSUER, advertised=advertised) == expected
