"""House rules the test suite keeps about itself (no database).

A test patches an object it imported, never a module path written in a string: with
`monkeypatch.setattr("runs.supervision.approvals.decide.run_dispatch", fake)` a module that moves leaves the
string behind, and the test fails at run time with an import error (or, worse, patches a stale
name) instead of at import, where a rename tool or the linter would have caught it. The object
form, `monkeypatch.setattr(decide, "run_dispatch", fake)` or `mock.patch.object(decide, ...)`,
moves with the code."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE_PATH = re.compile(r"^[a-z_][a-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
PLACEHOLDER = "x"  # what an f-string's {…} stands for when its text is matched against MODULE_PATH


def callee_name(call: ast.Call) -> str:
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    if isinstance(call.func, ast.Name):
        return call.func.id
    return ""


def first_argument_text(call: ast.Call) -> str | None:
    """The first positional argument as text when it is a string literal (an f-string's
    replacement fields read as PLACEHOLDER); None when it is anything else (an object)."""
    if not call.args:
        return None
    first = call.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    if isinstance(first, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else PLACEHOLDER for part in first.values)
    return None


def string_patches(source: str, filename: str) -> list[tuple[int, str]]:
    """(line, target) of every patch/setattr/delattr call in `source` whose target is a module path
    in a string. The builtin setattr(obj, "name", v) and patch.dict(os.environ, ...) pass objects."""
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if not isinstance(node, ast.Call):
            continue
        name = callee_name(node)
        if not (name.endswith("patch") or name in ("setattr", "delattr", "dict", "multiple")):
            continue
        text = first_argument_text(node)
        if text is not None and MODULE_PATH.match(text):
            found.append((node.lineno, text))
    return found


def files_kept_to_the_rules() -> list[Path]:
    return sorted((ROOT / "tests").rglob("*.py")) + [ROOT / "conftest.py"]


def test_no_test_patches_a_module_path_written_in_a_string():
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: patches {target!r}; import the module and patch the object"
        for path in files_kept_to_the_rules()
        for line, target in string_patches(path.read_text(), str(path))
    ]
    assert not offenders, "\n".join(offenders)


def test_the_rule_catches_each_form_of_a_string_patch_and_lets_objects_through():
    source = '''
import os
from unittest import mock
from runs.supervision.approvals import decide

def test_strings(monkeypatch, mocker):
    monkeypatch.setattr("runs.supervision.approvals.decide.run_dispatch", None)
    monkeypatch.delattr("runs.engine.dispatch._send")
    mock.patch("toolsapp.mcp.discovery.list_tools")
    patch("runs.engine.dispatch._send")
    mocker.patch("runs.lifecycle.forks.run_dispatch")
    mock.patch.dict("runs.engine.settings.LIMITS", {})
    mock.patch.multiple("runs.web.views.runs", run_dispatch=None)
    for where in ("runs.web.views.runs",):
        monkeypatch.setattr(f"{where}.run_dispatch", None)

def test_objects(monkeypatch, client):
    monkeypatch.setattr(decide, "run_dispatch", None)
    mock.patch.object(decide, "run_dispatch")
    mock.patch.dict(os.environ, {"A": "1"})
    setattr(decide, "run_dispatch", None)
    monkeypatch.setenv("DJANGO.SETTING", "1")
    client.patch("/api/v1/tools/1/", {})
    client.patch(f"/api/v1/tools/{1}/", {})
'''
    found = string_patches(source, "example.py")
    assert [line for line, _ in found] == [7, 8, 9, 10, 11, 12, 13, 15]
    assert found[-1][1] == "x.run_dispatch"
