"""advisor.settings: where the config file is found, what it holds, and that
it is the only module that finds or reads one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from advisor.errors import ConfigError
from advisor.settings import CONFIG_FILES, find_config, load_settings

REPO = Path(__file__).resolve().parents[1]
#: The package's source folders (installed as advisor, advisor.collectors, advisor.reports).
SOURCES = ("advisor", "collectors", "reports")
TOML_READERS = {"tomllib", "tomli", "toml", "tomlkit"}


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "a" / "b").mkdir(parents=True)
    return repo


def test_found_up_to_the_repository_root_and_never_above(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (tmp_path / "advisor.toml").write_text('rules = ["above"]\n')
    assert find_config(repo / "a" / "b") is None
    (repo / "advisor.toml").write_text('rules = ["r"]\n')
    assert find_config(repo / "a" / "b") == (repo / "advisor.toml").resolve()
    (repo / "a" / "pyproject.toml").write_text('[project]\nname = "x"\n')   # no [tool.advisor]: not a config
    assert find_config(repo / "a" / "b") == (repo / "advisor.toml").resolve()
    (repo / "a" / "pyproject.toml").write_text('[tool.advisor]\nrules = ["mine"]\n')
    assert find_config(repo / "a" / "b") == (repo / "a" / "pyproject.toml").resolve()
    assert load_settings(start=repo / "a" / "b").rules == [(repo / "a" / "mine").resolve()]


def test_outside_a_repository_only_the_current_folder(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "advisor.toml").write_text('rules = ["r"]\n')
    assert find_config(tmp_path / "sub") is None
    assert find_config(tmp_path) == (tmp_path / "advisor.toml").resolve()


def test_one_file_holds_rules_thresholds_and_gate(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.advisor]\nrules = "team"\n[tool.advisor.thresholds]\n"input-bound.min_data_wait_ratio" = 0.2\n'
        '[tool.advisor.gate]\nfail_on = ["critical"]\n')
    settings = load_settings(start=tmp_path)
    assert settings.rules == [(tmp_path / "team").resolve()]
    assert settings.overrides == {"input-bound": {"min_data_wait_ratio": 0.2}}
    assert settings.gate == {"fail_on": ["critical"]} and settings.gate_table == "tool.advisor.gate"
    paths, merged = settings.with_command_line(["extra"], {"input-bound": {"min_data_wait_ratio": 0.3}})
    assert paths == [(tmp_path / "team").resolve(), Path("extra")]
    assert merged == {"input-bound": {"min_data_wait_ratio": 0.3}}


@pytest.mark.parametrize("text, needle", [
    ("rules = 3\n", "rules: expected a list of paths"),
    ("thresholds = 3\n", "thresholds: expected a table"),
    ('[thresholds]\n"nodot" = 1\n', "expected \"rule.param\""),
    ('[thresholds]\n"a.b" = "x"\n', "is not a number"),
    ("gate = 3\n", "[gate] must be a table"),
    ("rules = [\n", "not valid TOML"),
])
def test_bad_entries_are_one_line_errors(tmp_path: Path, text: str, needle: str) -> None:
    (tmp_path / "advisor.toml").write_text(text)
    with pytest.raises(ConfigError, match="advisor.toml") as err:
        load_settings(start=tmp_path)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_a_config_that_is_not_utf8_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "advisor.toml").write_bytes(b'rules = ["\xff"]\n')
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(start=tmp_path)


def _modules():
    for folder in SOURCES:
        for path in sorted((REPO / folder).rglob("*.py")):
            yield path.relative_to(REPO).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def test_settings_is_the_one_place_that_finds_and_reads_config_files() -> None:
    """No other module imports a TOML reader, names a config file in code,
    or defines its own config lookup."""
    others = []
    for name, tree in _modules():
        if name == "advisor/settings.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                others += [f"{name}: import {a.name}" for a in node.names if a.name.split(".")[0] in TOML_READERS]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in TOML_READERS:
                others.append(f"{name}: from {node.module} import")
            elif isinstance(node, ast.Constant) and node.value in CONFIG_FILES:
                others.append(f"{name}: {node.value!r}")
            elif isinstance(node, (ast.FunctionDef, ast.Assign)) and {"find_config", "CONFIG_FILES"} & (
                    {node.name} if isinstance(node, ast.FunctionDef)
                    else {t.id for t in node.targets if isinstance(t, ast.Name)}):
                others.append(f"{name}: defines {getattr(node, 'name', 'CONFIG_FILES')}")
    assert others == []


def test_config_names_and_the_significance_level_are_defined_once() -> None:
    homes: dict[str, list[str]] = {"CONFIG_FILES": [], "DEFAULT_ALPHA": []}
    for name, tree in _modules():
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, ast.AnnAssign) else []
            for t in targets:
                if isinstance(t, ast.Name) and t.id in homes:
                    homes[t.id].append(name)
    assert homes == {"CONFIG_FILES": ["advisor/settings.py"], "DEFAULT_ALPHA": ["advisor/regression/compare.py"]}
