"""tests/conftest.py's cache of synthesized variants: its key changes with every input of synthesis and with nothing
else (a stale variant would let a broken app pass)."""

from __future__ import annotations

import subprocess

import pytest

import tests.conftest as shared


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A git work tree standing in for the project root, with an app file, a test, a doc and the variant registry."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for path, text in {"app.py": "app", "constructs_lib/a.py": "a", "tests/unit/test_a.py": "t",
                       "tests/app/variants.py": "v", "docs/deploy.md": "d", "container/README.md": "r"}.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    (tmp_path / ".gitignore").write_text("ignored/\n")
    monkeypatch.setattr(shared, "ROOT", tmp_path)
    monkeypatch.delenv("VARIANT_CACHE", raising=False)  # .ci/run turns the cache off for the suite itself
    return tmp_path


@pytest.mark.parametrize("path", ["app.py", "constructs_lib/a.py", "tests/app/variants.py", "container/README.md",
                                  "constructs_lib/new.py"])
def test_a_change_to_an_input_of_synthesis_changes_the_key(repo, path):
    before = shared.synthesis_inputs_digest()
    (repo / path).write_text("changed")
    assert shared.synthesis_inputs_digest() != before


@pytest.mark.parametrize("path", ["tests/unit/test_a.py", "docs/deploy.md", "ignored/out.json", "tests/unit/new.py"])
def test_a_change_to_tests_docs_or_ignored_files_keeps_the_key(repo, path):
    before = shared.synthesis_inputs_digest()
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text("changed")
    assert shared.synthesis_inputs_digest() == before


def test_the_environment_cdk_reads_changes_the_key(repo, monkeypatch):
    before = shared.synthesis_inputs_digest()
    monkeypatch.setenv("CDK_DEFAULT_REGION", "eu-west-1")
    assert shared.synthesis_inputs_digest() != before


def test_without_git_there_is_no_key_and_variants_are_synthesized_in_the_session(tmp_path, monkeypatch):
    monkeypatch.setattr(shared, "ROOT", tmp_path)  # not a git work tree
    assert shared.synthesis_inputs_digest() is None
    assert shared._variant_root(tmp_path / "session") == tmp_path / "session" / "variants"


def test_variant_cache_0_synthesizes_in_the_session(repo, tmp_path, monkeypatch):
    monkeypatch.setenv("VARIANT_CACHE", "0")
    assert shared._variant_root(tmp_path / "session") == tmp_path / "session" / "variants"


def test_only_the_most_recently_used_digests_are_kept(repo, monkeypatch):
    monkeypatch.setattr(shared, "VARIANT_CACHE_DIR", repo / "cache")
    roots = []
    for text in ["1", "2", "3"]:
        (repo / "app.py").write_text(text)
        roots.append(shared._variant_root(repo / "session"))
    kept = sorted(r.name for r in roots[-shared.VARIANT_CACHE_KEEP:])
    assert sorted(p.name for p in (repo / "cache").iterdir()) == kept
