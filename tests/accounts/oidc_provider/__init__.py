"""A tiny OpenID Connect provider (django-oauth-toolkit) that the single sign-on tests start as a
process of its own: its own settings, database and RSA key, its users' groups sent as a claim.
Nothing of it is part of the site; only the tests import it."""
