"""Whether a critical tool's calls can be approved where it is used: each needs two different
people's approval, neither the run's launcher, so a project with fewer than two people who may
decide calls can never approve one (and with exactly two, never one in a run either of them
launched). Said on the tool's page and when the flag is saved, before a call waits for nobody."""
from projects.holders import holders_of, names_text
from runs.roles import PERM_DECIDE


def critical_warning(*, critical: bool, project_id: int | None, project_name: str = "") -> str:
    """The warning for a tool marked critical in this project ("" when enough people may decide;
    a tool the site shares is used by many projects and is not judged here)."""
    if not critical or project_id is None:
        return ""
    deciders = holders_of(PERM_DECIDE, project_id)
    where = project_name or "its project"
    if len(deciders) < 2:
        who = f"only {names_text(deciders)} may decide calls in {where}" if deciders else f"no one may decide calls in {where}"
        return (f"Its calls can never be approved: each needs two different people's approval, and {who}. "
                f"Give a second person the operator role in {where}, or clear Critical.")
    if len(deciders) == 2:
        return (f"Only {names_text(deciders)} may decide calls in {where}: a call in a run one of them launched can "
                f"never be approved (two people other than the launcher must approve).")
    return ""
