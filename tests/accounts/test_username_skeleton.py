"""Which usernames read alike (accounts/username_skeleton.py)."""

import pytest

from accounts.username_skeleton import username_skeleton


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("admin", "\u0430dmin"),  # Cyrillic а
        ("admin", "ADMIN"),
        ("admin", "\u0410\u0414MIN".replace("\u0414", "D")),  # Cyrillic А, Latin DMIN
        ("admin", "\uff41\uff44\uff4d\uff49\uff4e"),  # fullwidth
        ("admin", "ad\u200bmin"),  # a zero-width space
        ("paypal", "p\u0430yp\u0430l"),
        ("bill", "biII"),  # capital I for l
        ("root", "r00t"),
        ("mary", "rnary"),
        ("ops", "\u03bfps"),  # Greek omicron
        ("hera", "\u041dera"),  # Cyrillic capital Н
    ],
)
def test_lookalikes_have_one_skeleton(one, other):
    assert username_skeleton(one) == username_skeleton(other)


@pytest.mark.parametrize(
    ("one", "other"),
    [("admin", "admins"), ("ivan", "\u0418\u0432\u0430\u043d"), ("anna", "\u00e4nna"), ("hera", "\u043dera")],
)
def test_names_that_read_differently_have_different_skeletons(one, other):
    assert username_skeleton(one) != username_skeleton(other)
