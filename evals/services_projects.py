"""Datasets and experiments per project (projects/access.py): what a person sees in the lists and
may choose in the forms, the project a new dataset goes to, and the checks of the ids a request
names in its body or query string. A thing of a project the person does not see is answered as if
it did not exist ("No run 7."); one they see but of another project than the dataset is refused in
words. A dataset's cases come from runs of its project, and its experiments run that project's
agents (an experiment's project is its agent's)."""
import json
import re

from evals import datasets as data
from evals.models import Dataset, Experiment
from hosting.text import MAX_SAFE_INTEGER, loads, storable_text
from projects import access
from projects.models import DEFAULT_SLUG, Project, default_project_id
from runs.models import Agent, Run
from runs.roles import PERM_ADD_DATASET, PERM_RUN_EXPERIMENT

# --- What a person sees -----------------------------------------------------------------------------


def datasets_seen(user):
    """datasets_counted() of the projects the person sees, with their project."""
    return access.scoped(data.datasets_counted().select_related("project"), user)


def experiments_seen(user, queryset=None):
    return access.scoped(Experiment.objects.all() if queryset is None else queryset, user, field="agent__project")


def runs_seen(user):
    return access.scoped(Run.objects.all(), user, field="agent__project")


def agents_seen(user):
    return access.scoped(Agent.objects.all(), user)


def agents_for(dataset: Dataset):
    """The agents an experiment of the dataset may run: its project's."""
    return Agent.objects.filter(project_id=dataset.project_id).order_by("name")


def datasets_for(run: Run):
    """The datasets a case made from the run may go to: its project's."""
    return Dataset.objects.filter(project_id=run.agent.project_id).order_by("name")


# --- A new dataset's project ------------------------------------------------------------------------


def dataset_projects(user):
    """The projects where the person may make a dataset."""
    allowed = access.projects_with(user, PERM_ADD_DATASET)
    projects = Project.objects.order_by("name")
    return projects if allowed is None else projects.filter(pk__in=allowed)


def dataset_project_default(user) -> Project | None:
    """A new dataset's project when none is named: the person's one project where they may make
    datasets, else the Default project if they may make them there, else None."""
    if access.projects_with(user, PERM_ADD_DATASET) is None:
        # Every project is theirs: the only one, or the Default project (made if it is gone).
        projects = list(Project.objects.all()[:2])
        return projects[0] if len(projects) == 1 else Project.objects.get(pk=default_project_id())
    projects = list(dataset_projects(user)[:2])
    if len(projects) == 1:
        return projects[0]
    return next((p for p in dataset_projects(user) if p.slug == DEFAULT_SLUG), None)


def no_project_chosen(user) -> str:
    names = [p.name for p in dataset_projects(user)]
    if not names:
        return "You may make datasets in no project."
    return f"Say which project the dataset is for: you may make datasets in {', '.join(names)}."


def project_named(user, value) -> Project:
    """The project named by id or slug, one the person sees; CaseInvalid (under `project`)
    otherwise, a project they do not see answered as if it did not exist."""
    project = None
    if isinstance(value, Project):
        project = value
    elif isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_SAFE_INTEGER:
        project = Project.objects.filter(pk=value).first()
    elif isinstance(value, str) and value.strip() and storable_text(value) and len(value) <= 200:
        text = value.strip()
        project = Project.objects.filter(slug=text).first()
        if project is None and text.isdigit() and int(text) <= MAX_SAFE_INTEGER:
            project = Project.objects.filter(pk=int(text)).first()
    else:
        raise data.CaseInvalid({"project": ["A project's id or slug."]})
    if project is None or not access.may_see(user, project.pk):
        raise data.CaseInvalid({"project": [f"No project {value!r}."]})
    return project


def project_for_dataset(user, value) -> Project:
    """project_named, where the person may make a dataset."""
    project = project_named(user, value)
    if not access.may(user, PERM_ADD_DATASET, project.pk):
        raise data.CaseInvalid({"project": [f"You may not make datasets in project {project.name}."]})
    return project


def dataset_create(*, project: Project | None, name: str, description: str = "", user=None) -> Dataset:
    """evals.datasets.dataset_create in a project: the one named (checked), else the person's
    default (dataset_project_default); CaseInvalid by field when there is none or the name is
    wrong."""
    project = dataset_project_default(user) if project is None else project_for_dataset(user, project)
    name = (name or "").strip()
    errors = {}
    if project is None:
        errors["project"] = [no_project_chosen(user)]
    if not name or len(name) > 100:
        errors["name"] = ["A name of 1 to 100 characters."]
    elif Dataset.objects.filter(name=name).exists():
        errors["name"] = [f"A dataset named {name!r} exists already."]
    if errors:
        raise data.CaseInvalid(errors)
    return Dataset.objects.create(name=name, description=description or "", project=project,
                                  created_by=user if getattr(user, "is_authenticated", False) else None)


# --- Ids named in a body ----------------------------------------------------------------------------


def _project_name(project_id: int | None) -> str:
    return Project.objects.filter(pk=project_id).values_list("name", flat=True).first() or "none"


def run_for_dataset(user, dataset: Dataset, run_id, field: str = "run") -> Run:
    """The run a case of the dataset is made from (or names as its source): one the person sees,
    of the dataset's project; CaseInvalid under `field` otherwise."""
    run = None
    if isinstance(run_id, Run):
        run_id = run_id.pk
    if isinstance(run_id, int) and not isinstance(run_id, bool) and 1 <= run_id <= MAX_SAFE_INTEGER:
        run = runs_seen(user).select_related("agent").filter(pk=run_id).first()
    if run is None:
        raise data.CaseInvalid({field: [f"No run {run_id!r}."]})
    if run.agent.project_id != dataset.project_id:
        raise data.CaseInvalid({field: [
            f"Run {run.pk} is of project {_project_name(run.agent.project_id)}, dataset {dataset.name} of project "
            f"{_project_name(dataset.project_id)}: a dataset's cases come from runs of its project."]})
    return run


def source_run_check(user, dataset: Dataset, values: dict) -> None:
    """A case's `source_run` (an id, in a body), if named: see run_for_dataset."""
    if values.get("source_run") is not None:
        run_for_dataset(user, dataset, values["source_run"], field="source_run")


def import_text_scoped(user, dataset: Dataset, text: str) -> str:
    """The JSONL with each source run the dataset's cases may not name (one the person does not
    see, or of another project) left out, as the import leaves out one that no longer exists: the
    case is kept, and copies nothing of that run. Every other line, and the line numbers, stay."""
    lines = [line for line in re.split(r"(?<=\n)", text) if line]  # as data.jsonl_lines: at line feeds only
    sources = {}
    for index, line in enumerate(lines):
        try:
            row = loads(line)
        except ValueError:
            continue
        source = row.get("source_run") if isinstance(row, dict) else None
        if isinstance(source, int) and not isinstance(source, bool):
            sources[index] = (row, source)
    if not sources:
        return text
    wanted = {s for _, s in sources.values() if 1 <= s <= MAX_SAFE_INTEGER}
    allowed = set(runs_seen(user).filter(pk__in=wanted, agent__project_id=dataset.project_id)
                  .values_list("pk", flat=True))
    for index, (row, source) in sources.items():
        if source not in allowed:
            row.pop("source_run")
            ending = lines[index][len(lines[index].rstrip("\r\n")):]
            lines[index] = json.dumps(row, ensure_ascii=False) + ending
    return "".join(lines)


def agent_problem(dataset: Dataset, agent: Agent) -> str | None:
    """Why an experiment of the dataset may not run this agent (one the person sees): another project."""
    if agent.project_id == dataset.project_id:
        return None
    return (f"Agent {agent.name} is of project {_project_name(agent.project_id)}, dataset {dataset.name} of project "
            f"{_project_name(dataset.project_id)}: an experiment runs an agent of its dataset's project.")


def may_run_experiment(user, dataset: Dataset) -> bool:
    return access.may(user, PERM_RUN_EXPERIMENT, dataset.project_id)
