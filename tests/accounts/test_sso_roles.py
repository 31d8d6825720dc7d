"""Claims to roles: a pure function."""

from accounts.sso_roles import roles_from_claims

ROLE_MAP = {"agentsite-admins": "admin", "agentsite-operators": "operator", "everyone": "viewer"}


def roles(claims, claim="groups"):
    return roles_from_claims(claims, claim=claim, role_map=ROLE_MAP)


def test_each_mapped_group_gives_its_role():
    assert roles({"groups": ["everyone", "agentsite-operators", "payroll"]}) == {"viewer", "operator"}
    assert roles({"groups": ["agentsite-admins"]}) == {"admin"}


def test_no_mapped_group_gives_no_role():
    assert roles({"groups": ["payroll"]}) == frozenset()
    assert roles({"groups": []}) == frozenset()
    assert roles({}) == frozenset()


def test_values_match_exactly():
    assert roles({"groups": ["Agentsite-Operators", " everyone", "everyone-else"]}) == frozenset()


def test_a_single_string_claim_counts_as_one_group():
    assert roles({"role": "agentsite-operators"}, claim="role") == {"operator"}


def test_a_dotted_claim_reads_nested_claims():
    claims = {"realm_access": {"roles": ["agentsite-admins"]}}
    assert roles(claims, claim="realm_access.roles") == {"admin"}
    assert roles({"realm_access": ["x"]}, claim="realm_access.roles") == frozenset()


def test_malformed_claims_give_no_role():
    assert roles({"groups": {"agentsite-admins": True}}) == frozenset()
    assert roles({"groups": 7}) == frozenset()
    assert roles({"groups": [["agentsite-admins"], None, 3]}) == frozenset()
