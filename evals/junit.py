"""An experiment as JUnit XML, for CI (`manage.py eval --junit FILE`): one <testsuite> for the
experiment, one <testcase> per case of the dataset. A failed case has a <failure> listing each
failed check ("label: seen"), saying "regressed against experiment N" when it passed there; a case
whose run did not end (still going, or cancelled with the experiment: timed out) has an <error>.

A plain function over the scorecard and the comparison (evals.scorecard); xml.etree only."""
import re
import xml.etree.ElementTree as ET

from django.conf import settings
from django.urls import reverse

from evals.models import CaseResult
from evals.scorecard import CasePair, Comparison, Scorecard
from runs.models import Run

# Characters XML 1.0 cannot hold at all (escaped or not): a model's answer may carry them.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def regressions(comparison: Comparison | None) -> list[CasePair]:
    """The cases that passed in the baseline and failed here, leaving out those whose run did not
    end (cancelled with the experiment: not a failure of the agent's)."""
    if comparison is None:
        return []
    return [p for p in comparison.regressions if p.after is not None and not not_ended(p.after)]


def not_ended(result: CaseResult) -> str | None:
    """Why a case's run did not end on its own, in words (not scored yet, or cancelled: the
    experiment was cancelled or timed out); None when it ended and was scored."""
    if result.status != CaseResult.Status.SCORED:
        return f"its run is {result.run.get_status_display().lower()}" if result.run else "its run was deleted"
    if result.stop_reason == Run.StopReason.CANCELLED:
        return "its run was cancelled"
    return None


def failed_checks(result: CaseResult) -> list[str]:
    """Each failed check of a scored case, as "label: seen"."""
    return [f"{check.get('label', check.get('kind', 'check'))}: {check.get('seen', '')}"
            for check in result.checks or [] if not check.get("ok")]


def junit_xml(card: Scorecard, comparison: Comparison | None = None) -> bytes:
    """The JUnit XML document (UTF-8, with its declaration) of `card`, regressions against
    `comparison`'s baseline named in their failures."""
    experiment = card.experiment
    dataset = experiment.dataset.name
    regressed = {p.after.pk for p in regressions(comparison)}
    errors = sum(1 for r in card.results if not_ended(r))
    failures = sum(1 for r in card.results if not not_ended(r) and not r.passed)
    total_seconds = sum(r.seconds for r in card.scored)
    root = ET.Element("testsuites", name=f"experiment {experiment.pk}", tests=str(len(card.results)),
                      failures=str(failures), errors=str(errors), time=_seconds(total_seconds))
    suite = ET.SubElement(root, "testsuite", {
        "name": _xml(f"{dataset}: {experiment.label}"), "tests": str(len(card.results)), "failures": str(failures),
        "errors": str(errors), "skipped": "0", "time": _seconds(total_seconds),
        "timestamp": experiment.created_at.replace(microsecond=0).isoformat() if experiment.created_at else "",
    })
    properties = ET.SubElement(suite, "properties")
    for name, value in (("experiment", experiment.pk), ("agent", experiment.agent.name),
                        ("agent_version", experiment.agent_version), ("draft", str(experiment.draft).lower()),
                        ("status", experiment.status), ("url", settings.SITE_URL.rstrip("/") + reverse("experiment_detail", args=[experiment.pk])),
                        ("baseline", comparison.before.pk if comparison else "")):
        ET.SubElement(properties, "property", name=name, value=_xml(str(value)))
    for result in card.results:
        case = ET.SubElement(suite, "testcase", classname=_xml(dataset), name=_xml(result.case_name),
                             time=_seconds(result.seconds))
        why = not_ended(result)
        if why:
            error = ET.SubElement(case, "error", message=f"the case did not end: {why}", type="not ended")
            error.text = f"run: {reverse('run_detail', args=[result.run_id])}" if result.run_id else why
            continue
        if result.passed:
            continue
        checks = failed_checks(result) or ["the case failed"]
        message = "; ".join(checks)
        if result.pk in regressed:
            message = f"regressed against experiment {comparison.before.pk}: {message}"
        failure = ET.SubElement(case, "failure", message=_xml(message),
                                type="regression" if result.pk in regressed else "failed check")
        lines = [*checks, f"stop reason: {result.stop_reason_label or 'none'}"]
        if result.run_id:
            lines.append(f"run: {reverse('run_detail', args=[result.run_id])}")
        failure.text = _xml("\n".join(lines))
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def junit_write(path, card: Scorecard, comparison: Comparison | None = None) -> None:
    with open(path, "wb") as out:
        out.write(junit_xml(card, comparison) + b"\n")


def _xml(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def _seconds(value: float) -> str:
    return f"{value:.3f}"
