"""A rule file whose YAML aliases expand to billions of values ("billion
laughs") is refused with one line naming the file, before anything walks
the expanded values; ordinary aliases still load."""

from __future__ import annotations

import pytest

from advisor.cli.app import main
from advisor.engine import loader
from advisor.engine.loader import builtin_rule_files, read_rule
from advisor.errors import ConfigError


def _laughs(levels: int) -> str:
    """Anchors ``l0`` .. ``l{levels}``, each a list of nine aliases of the
    previous one: 9**levels strings in a few hundred bytes."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    return "\n".join(lines)


def _bomb_rule(tmp_path, levels: int = 9):
    """A shipped rule whose first example carries the bomb among its metrics
    (values of any type are allowed there)."""
    source = next(p for p in builtin_rule_files() if p.name == "host_bound.yaml")
    text = source.read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if x.strip().startswith("metrics: {") and x.endswith("}")
                and not any(c in x.strip()[len("metrics: {"):-1] for c in "{}[]"))  # a flat one
    indent = line[: len(line) - len(line.lstrip())] + "  "
    metrics = line.strip()[len("metrics: {"):-1].split(", ")
    block = [indent + m for m in metrics] + [indent + x for x in _laughs(levels).splitlines()]
    path = tmp_path / "host_bound.yaml"
    path.write_text(text.replace(line, line[: len(indent) - 2] + "metrics:\n" + "\n".join(block), 1), encoding="utf-8")
    return path


def test_anchor_bomb_is_refused_by_rules_validate(tmp_path, capsys):
    path = _bomb_rule(tmp_path)
    assert path.stat().st_size < 10_000  # 9**9 (387 million) strings once expanded
    with pytest.raises(ConfigError) as err:
        read_rule(path)
    assert str(path) in str(err.value) and "aliases" in str(err.value)
    with pytest.raises(SystemExit) as done:
        main(["rules", "validate", str(path)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert done.value.code == 2
    assert len(lines) == 1 and lines[0].startswith(f"{path}: ") and "aliases" in lines[0]


def test_recursive_alias_is_refused(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text("a: &a [1, *a]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="aliases"):
        read_rule(path)


def test_small_aliases_still_load(tmp_path):
    # Two levels of aliases expand to 81 strings, far below the bound.
    rule = read_rule(_bomb_rule(tmp_path, levels=2))
    assert any(len(e.metrics.get("l2", ())) == 9 for e in rule.examples)


def test_expanded_size_counts_shared_values_at_each_place():
    shared = [1, 2, 3]
    assert loader._expanded_size({"a": shared, "b": shared}, 100) == 1 + 2 * (1 + 4)
    assert loader._expanded_size([shared] * 50, 100) == 101  # over the bound: limit + 1
