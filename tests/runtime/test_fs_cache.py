"""Nothing advisor reads from its cache can run code it did not write.

The cache holds a pickle (the CEL parser) and Python bytecode (the report
template): loading either runs whatever it says. Entries are signed with a
per-user key kept outside the cache folder, so that

* a planted entry -- a pickle that writes a file when loaded, under the
  very names advisor uses -- is never loaded, and the real thing is rebuilt;
* a cache folder copied in from elsewhere (a CI cache restored between
  jobs) is not trusted, since its key did not come with it;
* a cache folder or key that another user owns or can write is ignored;
* and a genuine cache is still used (the parser is loaded, not rebuilt).
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from advisor.runtime import cache

IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

#: A fresh process: how the CEL parser was made (from the cache or built),
#: how often Jinja compiled the report template, and a rendered report.
PROBE = textwrap.dedent("""
    import sys, jinja2
    compiled = []
    original = jinja2.Environment.compile
    def counting(self, source, name=None, *args, **kwargs):
        compiled.append(name == "report.html.j2")
        return original(self, source, name, *args, **kwargs)
    jinja2.Environment.compile = counting
    import advisor
    from advisor.reports import render_html, render_markdown
    from celpy.celparser import CELParser
    report = advisor.analyze(sys.argv[1])
    report.run.generated_at = "then"
    text = render_markdown(report) + render_html(report)
    print(CELParser.CEL_PARSER.source_path, sum(compiled))
    print(text)
""")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "resnet50_data_bound"


class _Planted:
    """Unpickling this creates the file ``path`` (proof that the pickle ran)."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _probe(cache_home: Path, state_home: Path) -> tuple[str, int, str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home), "XDG_STATE_HOME": str(state_home)}
    out = subprocess.run([sys.executable, "-c", PROBE, str(EXAMPLE)], capture_output=True, text=True,
                         env=env, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    head, _, body = out.stdout.partition("\n")
    how, compiled = head.split()
    return how, int(compiled), body


def test_a_planted_pickle_is_never_run_and_the_genuine_cache_is_used(tmp_path):
    cache_home, state_home = tmp_path / "cache", tmp_path / "state"
    how, compiled, first = _probe(cache_home, state_home)
    assert how != "<deserialized>" and compiled >= 1  # built, and stored
    how, compiled, again = _probe(cache_home, state_home)
    assert (how, compiled, again) == ("<deserialized>", 0, first)  # the genuine cache saves the work
    folder = cache_home / "advisor"
    entries = sorted(folder.iterdir())
    assert [p.name.split("-")[0] for p in entries] == ["cel", "jinja"]
    ran = tmp_path / "the-pickle-ran"
    payload = pickle.dumps({"data": _Planted(ran), "memo": {}})
    for forged in (payload, getattr(cache, "MAGIC", b"") + bytes(32) + payload):  # bare; a made-up signature
        for entry in entries:
            entry.write_bytes(forged)
            entry.chmod(0o600)
        how, compiled, after = _probe(cache_home, state_home)
        assert not ran.exists(), "a planted cache entry was loaded"
        assert how != "<deserialized>" and compiled >= 1 and after == first
        assert all(entry.read_bytes() != forged for entry in entries)  # rebuilt and stored again


def test_a_cache_restored_without_its_key_is_not_trusted(tmp_path):
    cache_home = tmp_path / "cache"
    _probe(cache_home, tmp_path / "state")
    restored = tmp_path / "restored"
    shutil.copytree(cache_home, restored)  # e.g. a CI cache from another job, with its entries only
    how, compiled, _ = _probe(restored, tmp_path / "another-state")
    assert how != "<deserialized>" and compiled >= 1


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path


def test_the_key_is_private_and_entries_are_signed(home):
    cache.write("entry.bin", b"payload")
    key_file = cache.key_dir() / cache.KEY_FILE
    assert key_file.stat().st_mode & 0o777 == 0o600 and len(key_file.read_bytes()) == cache.KEY_BYTES
    assert [p.name for p in cache.cache_dir().iterdir()] == ["entry.bin"]
    assert cache.read("entry.bin") == b"payload"
    entry = cache.cache_dir() / "entry.bin"
    assert entry.read_bytes().endswith(b"payload") and entry.stat().st_mode & 0o077 == 0
    os.rename(entry, cache.cache_dir() / "other.bin")
    assert cache.read("other.bin") is None  # signed for its name: not valid under another


@pytest.mark.parametrize("weaken", ["folder-writable-by-others", "key-readable-by-others", "entry-is-a-symlink"])
def test_a_cache_others_could_have_written_is_ignored(home, weaken):
    cache.write("entry.bin", b"payload")
    assert cache.read("entry.bin") == b"payload"
    if weaken == "folder-writable-by-others":
        cache.cache_dir().chmod(0o777)
    elif weaken == "key-readable-by-others":
        (cache.key_dir() / cache.KEY_FILE).chmod(0o644)
    else:
        entry = cache.cache_dir() / "entry.bin"
        os.rename(entry, home / "elsewhere.bin")
        entry.symlink_to(home / "elsewhere.bin")
    assert cache.read("entry.bin") is None
    if weaken != "entry-is-a-symlink":  # the whole cache is out of use
        cache.write("fresh.bin", b"new")
        assert cache.read("fresh.bin") is None


@pytest.mark.skipif(not IS_ROOT, reason="handing a folder to another user needs root")
@pytest.mark.parametrize("whose", ["cache folder", "key file"])
def test_a_cache_owned_by_another_user_is_ignored(home, whose):
    cache.write("entry.bin", b"payload")
    os.chown(cache.cache_dir() if whose == "cache folder" else cache.key_dir() / cache.KEY_FILE, 65534, 65534)
    assert cache.read("entry.bin") is None
