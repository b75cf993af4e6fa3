"""Finding, reading and validating rule files, and their language overlays.

A rule file holds one rule in English. Its translation is an *overlay*: a
file of the same name in a folder named for the language next to it
(``rules/zh/input_bound.yaml`` for ``rules/input_bound.yaml``; the same for
user rule folders). An overlay holds only texts -- ``title``, ``message``,
``explanation``, ``fix`` texts (and code, to translate its comments),
``caveats``, ``params`` descriptions and the ``confirm`` text -- as
templates over the same metric and parameter names. Thresholds, conditions
and examples live in the English file only; :func:`overlay_problems` checks
that an overlay adds no keys the rule lacks, changes no code, and writes no
number of its own.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from advisor.collectors.io.files import read_bytes
from advisor.engine.schema import Rule, caveat_text
from advisor.errors import ConfigError, InputError
from advisor.i18n import DEFAULT_LANG, LANGS


def builtin_rule_files() -> list[Path]:
    """The rule files shipped with advisor (``advisor.rules`` package data)."""
    root = resources.files("advisor.rules")
    return sorted(Path(str(p)) for p in root.iterdir() if p.name.endswith(".yaml"))


def _rule_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml"))
    if path.is_file():
        return [path]
    raise ConfigError(f"{path}: no such rule file or folder")


#: libyaml's parser when PyYAML was built with it (ten times faster than
#: the pure-Python one; the same safe constructor builds the values).
_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _safe_load(text: str):
    try:
        return yaml.load(text, Loader=_FAST_LOADER)
    except yaml.YAMLError:
        # the pure-Python parser decides, and its message names the problem
        return yaml.safe_load(text)


#: Bound on the values of one rule file with its aliases expanded (each
#: mapping, list and scalar counts once per place it appears). A rule file
#: holds a few hundred; aliases of aliases ("billion laughs") reach billions
#: in a few lines, which validating and evaluating the file would expand.
MAX_EXPANDED_VALUES = 100_000


def _expanded_size(data, limit: int) -> int:
    """The number of values in ``data`` counting a shared (aliased) value at
    each place it appears; ``limit + 1`` as soon as it exceeds ``limit`` or
    when a value contains itself (a recursive alias). Linear in the number
    of distinct values: the size of each shared value is computed once."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()

    def size(value) -> int:
        if not isinstance(value, (dict, list)):
            return 1
        key = id(value)
        if key in sizes:
            return sizes[key]
        if key in open_:
            return limit + 1
        open_.add(key)
        items = (x for kv in value.items() for x in kv) if isinstance(value, dict) else value
        total = 1
        for item in items:
            total += size(item)
            if total > limit:
                break
        open_.discard(key)
        sizes[key] = total = min(total, limit + 1)
        return total

    try:
        return size(data)
    except RecursionError:
        return limit + 1


def _read_yaml(path: Path) -> dict:
    try:  # a regular file only: a FIFO named like a rule file would block the read forever
        data = _safe_load(read_bytes(path).decode("utf-8"))
    except InputError as exc:
        raise ConfigError(f"{path}: not a readable YAML file ({exc.problem})") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: not a readable YAML file ({_first_line(exc)})") from None
    if _expanded_size(data, MAX_EXPANDED_VALUES) > MAX_EXPANDED_VALUES:
        raise ConfigError(f"{path}: more than {MAX_EXPANDED_VALUES} values once its aliases are expanded "
                          "(recursive or nested YAML aliases); write the values out")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a rule file must hold a mapping")
    return data


def _validate(model: type[BaseModel], data: dict, path: Path):
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "(top level)"
        raise ConfigError(f"{path}: {where}: {err['msg']}") from None


def read_rule(path: Path) -> Rule:
    """Parse and validate one rule file; ConfigError names the file and field."""
    return _validate(Rule, _read_yaml(path), path)


# ---------------------------------------------------------------- overlays


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FixOverlay(_Strict):
    text: str
    code: str | None = Field(None, description="the English code with its comments translated")


class ExplanationOverlay(_Strict):
    what: str
    why: str
    how: str


class ParamOverlay(_Strict):
    description: str


class ConfirmOverlay(_Strict):
    text: str


class RuleOverlay(_Strict):
    """The translated texts of one rule (see the module doc)."""

    id: str = Field(description="the rule's id, as a check that the overlay belongs to it")
    title: str
    message: str
    explanation: ExplanationOverlay
    fix: dict[str, FixOverlay] = Field(default_factory=dict)
    caveats: list[str] = Field(default_factory=list)
    params: dict[str, ParamOverlay] = Field(default_factory=dict)
    confirm: ConfirmOverlay | None = Field(None, description="the text of the rule's direct-evidence check")


def overlay_path(rule_file: Path, lang: str) -> Path:
    """Where the ``lang`` overlay of ``rule_file`` lives."""
    return Path(rule_file).parent / lang / Path(rule_file).name


def read_overlay(path: Path) -> RuleOverlay:
    """Parse and validate one overlay file."""
    return _validate(RuleOverlay, _read_yaml(path), path)


_TAG = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.S)
# a number standing alone: not part of an identifier such as fp16, O2, HF32
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.]*[A-Za-z_])")
_PLACEHOLDER = re.compile(r"<[^<>\n]*>")


def _numbers(text: str) -> set[str]:
    return set(_NUMBER.findall(_TAG.sub(" ", text or "")))


def _code_body(code: str | None) -> list[str]:
    """A snippet without comments and with ``<placeholders>`` blanked: what
    a translation must leave unchanged."""
    out = []
    for line in (code or "").splitlines():
        body = _PLACEHOLDER.sub("<>", line.split("#", 1)[0]).rstrip()
        if body:
            out.append(body)
    return out


def overlay_problems(rule: Rule, overlay: RuleOverlay, *, complete: bool = True) -> list[str]:
    """What is wrong with ``overlay`` as a translation of ``rule``: keys the
    rule lacks, a changed code snippet, numbers the English text does not
    have (thresholds belong in params) and, with ``complete``, texts left
    untranslated."""
    problems: list[str] = []
    if overlay.id != rule.id:
        problems.append(f"id {overlay.id} does not match the rule's id {rule.id}")
    for key in sorted(set(overlay.fix) - set(rule.fix)):
        problems.append(f"fix.{key}: the rule has no fix for {key}")
    for key in sorted(set(overlay.params) - set(rule.params)):
        problems.append(f"params.{key}: the rule has no parameter {key}")
    if overlay.confirm is not None and rule.confirm is None:
        problems.append("confirm: the rule has no confirm text")
    if overlay.caveats and len(overlay.caveats) != len(rule.caveats):
        problems.append(f"caveats: {len(overlay.caveats)} given, the rule has {len(rule.caveats)}")
    if complete:
        for key in sorted(set(rule.fix) - set(overlay.fix)):
            problems.append(f"fix.{key}: not translated")
        for key in sorted(set(rule.params) - set(overlay.params)):
            problems.append(f"params.{key}: description not translated")
        if rule.caveats and not overlay.caveats:
            problems.append("caveats: not translated")
        if rule.confirm is not None and overlay.confirm is None:
            problems.append("confirm.text: not translated")
    pairs = [
        ("title", rule.title, overlay.title),
        ("message", rule.message, overlay.message),
        ("explanation.what", rule.explanation.what, overlay.explanation.what),
        ("explanation.why", rule.explanation.why, overlay.explanation.why),
        ("explanation.how", rule.explanation.how, overlay.explanation.how),
    ]
    for key, fx in overlay.fix.items():
        base = rule.fix.get(key)
        if base is None:
            continue
        pairs.append((f"fix.{key}.text", base.text, fx.text))
        if fx.code is not None:
            if _code_body(fx.code) != _code_body(base.code):
                problems.append(f"fix.{key}.code: differs from the rule's code beyond comments and <placeholders>")
            pairs.append((f"fix.{key}.code", base.code or "", fx.code))
    if overlay.confirm is not None and rule.confirm is not None:
        pairs.append(("confirm.text", rule.confirm.text, overlay.confirm.text))
    if len(overlay.caveats) == len(rule.caveats):
        pairs += [(f"caveats.{i}", caveat_text(a), b) for i, (a, b) in enumerate(zip(rule.caveats, overlay.caveats))]
    for key, p in overlay.params.items():
        if key in rule.params:
            pairs.append((f"params.{key}.description", rule.params[key].description, p.description))
    for where, english, translated in pairs:
        extra = sorted(_numbers(translated) - _numbers(english))
        if extra:
            problems.append(
                f"{where}: number(s) {', '.join(extra)} not in the English text "
                "(use a template over params or metrics)"
            )
    return problems


def apply_overlay(rule: Rule, overlay: RuleOverlay) -> Rule:
    """``rule`` with the overlay's texts; what the overlay lacks stays English."""
    fix = {}
    for key, base in rule.fix.items():
        fx = overlay.fix.get(key)
        fix[key] = base if fx is None else base.model_copy(
            update={"text": fx.text, "code": fx.code if fx.code is not None else base.code}
        )
    params = {
        key: p if key not in overlay.params else p.model_copy(update={"description": overlay.params[key].description})
        for key, p in rule.params.items()
    }
    caveats = rule.caveats
    if len(overlay.caveats) == len(rule.caveats):  # translated texts, the rule's platforms
        caveats = [text if isinstance(c, str) else c.model_copy(update={"text": text})
                   for c, text in zip(rule.caveats, overlay.caveats)]
    confirm = rule.confirm
    if confirm is not None and overlay.confirm is not None:
        confirm = confirm.model_copy(update={"text": overlay.confirm.text})
    return rule.model_copy(
        update={
            "confirm": confirm,
            "title": overlay.title,
            "message": overlay.message,
            "explanation": rule.explanation.model_copy(update=overlay.explanation.model_dump()),
            "fix": fix,
            "caveats": list(caveats),
            "params": params,
        }
    )


def localize(rule: Rule, path: Path, lang: str) -> Rule:
    """``rule`` (read from ``path``) in ``lang``: its overlay applied when one
    exists; English otherwise. ConfigError when the overlay is malformed or
    does not fit the rule."""
    if lang == DEFAULT_LANG:
        return rule
    if lang not in LANGS:
        raise ConfigError(f"unknown language {lang!r} (choose from {', '.join(LANGS)})")
    opath = overlay_path(path, lang)
    if not opath.is_file():
        return rule
    overlay = read_overlay(opath)
    problems = overlay_problems(rule, overlay, complete=False)
    if problems:
        raise ConfigError(f"{opath}: {problems[0]}")
    return apply_overlay(rule, overlay)


def load_rules(extra: list[Path] | tuple[Path, ...] = (), lang: str = DEFAULT_LANG) -> list[Rule]:
    """Built-in rules plus user rule files/folders, in ``lang`` (texts from
    each rule's overlay where it has one); ids and names must be unique."""
    files = builtin_rule_files()
    for path in extra:
        files.extend(_rule_files(Path(path)))
    rules: list[Rule] = []
    seen: dict[str, Path] = {}
    for path in files:
        rule = read_rule(path)
        for key in (rule.id, rule.name):
            if key in seen:
                raise ConfigError(f"{path}: {key} is already used by {seen[key]}")
            seen[key] = path
        rules.append(localize(rule, path, lang))
    return rules


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
