"""Which of the project's roles a person's identity-provider claims give: one pure function."""

from collections.abc import Mapping


def roles_from_claims(claims: Mapping, *, claim: str, role_map: Mapping[str, str]) -> frozenset[str]:
    """The roles (viewer, operator, admin) whose mapped values appear in claims[claim].

    The claim may be a list of group names or a single string (some providers send one role);
    a dotted name reads a nested claim ("realm_access.roles"). Values match exactly: a provider
    group "Agentsite-Operators" is not "agentsite-operators". Anything else (a number, an object,
    a missing claim) gives no role.
    """
    value = claims.get(claim)
    if value is None and "." in claim:
        value = claims
        for key in claim.split("."):
            value = value.get(key) if isinstance(value, Mapping) else None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple):
        return frozenset()
    return frozenset(role_map[item] for item in value if isinstance(item, str) and item in role_map)
