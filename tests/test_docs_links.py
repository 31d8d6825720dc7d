"""The README and docs/ hold together: every relative link (a file, a folder, an image) leads to
something in the checkout, and every anchor (`#section`, `other.md#section`) names a heading of
its target, as GitHub makes anchors from headings. A section renamed or moved to another page
fails here with the file, the line and the link. The README stays a front door (at most 220 lines).
No database, no browser: the files are read as text."""

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 220

FENCE = re.compile(r"^\s{0,3}(```|~~~)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](target) and ![alt](target); the target may be <bracketed> and followed by a "title".
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+[\"'(][^)]*)?\s*\)")
REFERENCE_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)", re.MULTILINE)
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)
HTML_ANCHOR = re.compile(r"\b(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.IGNORECASE)


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def outside_code(text: str) -> list[tuple[int, str]]:
    """The lines of a Markdown file that are not inside a fenced code block, numbered from 1."""
    lines, fence = [], None
    for number, line in enumerate(text.splitlines(), start=1):
        opening = FENCE.match(line)
        if fence is None and opening:
            fence = opening.group(1)
        elif fence is not None:
            if line.strip().startswith(fence):
                fence = None
        else:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text: lowercase; links keep their text; punctuation goes
    (letters, digits, underscores, hyphens and spaces stay); each space becomes a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor of a Markdown file: its headings' slugs (a repeated one gets -1, -2, ...)
    and the ids or names of HTML elements in it."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in outside_code(path.read_text(encoding="utf-8")):
        found.update(HTML_ANCHOR.findall(line))
        heading = HEADING.match(line)
        if not heading:
            continue
        base = slug(heading.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every link and image of a Markdown file, outside code blocks and spans.
    A link's text may run over several lines; the line is the target's."""
    prose_lines = dict(outside_code(path.read_text(encoding="utf-8")))
    last = max(prose_lines, default=0)
    prose = "\n".join(CODE_SPAN.sub("", prose_lines.get(number, "")) for number in range(1, last + 1))
    found = []
    for pattern in (INLINE_LINK, HTML_LINK, REFERENCE_DEFINITION):
        for match in pattern.finditer(prose):
            found.append((prose.count("\n", 0, match.start(1)) + 1, match.group(1).strip("<>")))
    return sorted(found)


def broken_links(path: Path) -> list[str]:
    """What is wrong with each relative link of a file, as `file:line: target: why`."""
    problems = []
    for number, target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("//"):
            continue  # http(s), mailto and other schemes: outside the checkout
        where = f"{path.relative_to(ROOT)}:{number}: {target}"
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / unquote(file_part)).resolve() if file_part else path
        if not destination.exists():
            problems.append(f"{where}: {file_part} does not exist")
            continue
        if not anchor:
            continue
        if destination.suffix != ".md":
            problems.append(f"{where}: an anchor into {destination.name}, which has no headings")
        elif unquote(anchor) not in anchors(destination):
            problems.append(f"{where}: no heading of {destination.relative_to(ROOT)} makes #{anchor}")
    return problems


def test_slugs_follow_githubs_rules():
    assert slug("Traces (OpenTelemetry)") == "traces-opentelemetry"
    assert slug("Replay a step's request") == "replay-a-steps-request"
    assert slug("What ./start runs") == "what-start-runs"
    assert slug("Production: HTTPS, passwords, keys") == "production-https-passwords-keys"
    assert slug("The `run_agent` command") == "the-run_agent-command"
    assert slug("A [linked](other.md) heading") == "a-linked-heading"


def test_repeated_headings_get_numbered_anchors(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Notes\n\n## Setup\n\n```\n## Not a heading\n```\n\n## Setup\n\n## Setup\n")
    assert anchors(page) == {"notes", "setup", "setup-1", "setup-2"}


def test_links_in_code_are_not_links(tmp_path):
    page = tmp_path / "page.md"
    page.write_text('[a](a.md) `[b](b.md)`\n\n```md\n[c](c.md)\n```\n![d](img/d.png "D")\n')
    assert links(page) == [(1, "a.md"), (6, "img/d.png")]


def test_a_link_whose_text_runs_over_lines_is_a_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "Intro.\n\n![A picture whose alt text\nruns over two lines](images/shot.png)\n\n[ref]: other.md#part\n"
    )
    assert links(page) == [(4, "images/shot.png"), (6, "other.md#part")]


@pytest.mark.parametrize("path", documents(), ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_and_anchor_leads_somewhere(path):
    problems = broken_links(path)
    assert not problems, "\n".join(problems)


def test_the_readme_is_a_front_door():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"
