"""Whether a browser session still signs its user in, read afresh from the session store and the
database. Channels reads the session and the user once, when a websocket connects; a socket that
acts (decides an approval) checks again with this before each action.
"""
from importlib import import_module

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model, load_backend
from django.utils.crypto import constant_time_compare


def session_user(session_key: str | None):
    """The user this session signs in now, a fresh instance (no cached permissions); None when
    the session is gone (signed out, expired), its password hash no longer matches (password
    changed) or the account was deactivated.

    Unlike django.contrib.auth.get_user this never changes the session: a socket cannot hand a
    browser a new cookie.
    """
    if not session_key:
        return None
    session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user_id, backend_path = session.get(SESSION_KEY), session.get(BACKEND_SESSION_KEY)
    if user_id is None or backend_path not in settings.AUTHENTICATION_BACKENDS:
        return None
    user = load_backend(backend_path).get_user(get_user_model()._meta.pk.to_python(user_id))
    if user is None or not getattr(user, "is_active", False):
        return None
    session_hash = session.get(HASH_SESSION_KEY) or ""
    hashes = [user.get_session_auth_hash(), *user.get_session_auth_fallback_hash()]
    if not any(constant_time_compare(session_hash, h) for h in hashes):
        return None
    return user
