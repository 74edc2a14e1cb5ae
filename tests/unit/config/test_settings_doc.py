"""docs/settings.md and cdk.json's settings are what the settings dataclasses say
(``config/settings_doc.py`` writes
both), and the other pages' tables of settings give the dataclasses' defaults."""

from __future__ import annotations

import json
import re

import pytest

from config import context as ctx, settings_doc
from config.settings import KNOWN_KEYS, SECTIONS, default_context
from tests.conftest import ROOT

DOCS = sorted((ROOT / "docs").glob("*.md"))


def table_rows(text: str) -> dict[str, tuple[str, str]]:
    """``{key: (type cell, default cell)}`` of the generated tables."""
    rows = re.findall(r"^\| `([a-z_.0-9]+)` \| (.+?) \| `(.*)` \|$", text, flags=re.M)
    keys = [key for key, _, _ in rows]
    assert len(keys) == len(set(keys)), "a key listed twice"
    return {key: (kind, default) for key, kind, default in rows}


def test_the_page_is_what_the_generator_writes_from_the_dataclasses():
    page = settings_doc.PAGE.read_text()
    assert settings_doc.render(page) == page, (
        "docs/settings.md is out of date: run python -m config.settings_doc"
    )
    assert settings_doc.main(["--check"]) == 0


def test_every_setting_is_in_the_table_with_its_default_and_nothing_else_is():
    rows = table_rows(settings_doc.PAGE.read_text())
    assert set(rows) == set(KNOWN_KEYS)
    for key, value in default_context().items():
        shown = rows[key][1]
        assert (shown if isinstance(value, str) else json.loads(shown)) == value, key


def test_every_setting_has_a_description():
    """A new field needs its ``#:`` comment: the page would list it with nothing to say."""
    missing = [
        key.name
        for prefix, section in SECTIONS.items()
        for key in ctx.section_keys(section, prefix)
        if not settings_doc.description(section, key.field)
    ]
    assert missing == []


@pytest.mark.parametrize(
    "key, shown",
    [
        ("retain_data", "true or false"),
        ("log_retention_days", "whole number"),
        ("stack_name_prefix", "string"),
        ("voxtral.max_num_seqs", "whole number or `auto`"),
        ("voxtral.stage_model", "true or false or null"),
        ("voxtral.kv_cache_dtype", "one of `auto`, `fp8`"),
        ("network.subnet_ids", "list of strings"),
        ("voxtral.gpu_memory_utilization", "number"),
        ("voxtral.instance_provision_timeout_s", "whole number or null"),
    ],
)
def test_the_type_column_says_what_the_conversion_accepts(key, shown):
    assert table_rows(settings_doc.PAGE.read_text())[key][0] == shown


def test_each_value_the_page_allows_converts_and_others_are_refused():
    """The values listed for a choice ("one of ...", in the table or the description) are exactly
    the field's."""
    page = settings_doc.PAGE.read_text()
    for key, setting in KNOWN_KEYS.items():
        hint = setting.hint
        kind = settings_doc.type_text(hint)
        if "one of " not in kind:
            continue
        listed = re.findall(r"`([^`]+)`", kind.split("one of ", 1)[1])
        for value in listed:
            assert ctx.convert(value, hint) == value
        with pytest.raises(ValueError, match="must be one of"):
            ctx.convert("not-" + listed[0], hint)
        text = re.sub(r"\s+", " ", page)  # the description wraps a long list
        assert kind in text, key


def test_a_stale_page_is_reported_and_rewritten(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "settings.md"
    page = settings_doc.PAGE.read_text()
    stale.write_text(
        page.replace("| `region` | string | `us-east-1` |", "| `region` | string | `eu-west-1` |")
    )
    monkeypatch.setattr(settings_doc, "PAGE", stale)
    assert settings_doc.main(["--check"]) == 1
    assert "is out of date: run python -m config.settings_doc" in capsys.readouterr().err
    assert settings_doc.main([]) == 0 and stale.read_text() == page


def test_cdk_json_is_what_the_generator_writes_and_keeps_the_cdks_own_keys(
    tmp_path, monkeypatch, capsys
):
    """cdk.json's context: every setting with its default, in the page's order, then the CDK's
    feature flags as they are; a stale one is reported and rewritten, with the rest of the file
    kept."""
    text = settings_doc.CDK_JSON.read_text()
    assert settings_doc.render_cdk_json(text) == text
    document = json.loads(text)
    keys = [key for key in document["context"] if not ctx.is_cdk_key(key)]
    assert keys == list(default_context())
    stale = dict(
        document,
        context={
            "voxtral.max_num_seqs": 4,
            "region": "eu-west-1",
            "@aws-cdk/core:newStyleStackSynthesis": True,
        },
    )
    path = tmp_path / "cdk.json"
    path.write_text(json.dumps(stale, indent=2) + "\n")
    monkeypatch.setattr(settings_doc, "CDK_JSON", path)
    assert settings_doc.main(["--check"]) == 1
    assert f"{path} is out of date: run python -m config.settings_doc" in capsys.readouterr().err
    assert settings_doc.main([]) == 0
    rewritten = json.loads(path.read_text())
    assert rewritten["context"] == {
        **default_context(),
        "@aws-cdk/core:newStyleStackSynthesis": True,
    }
    assert {k: v for k, v in rewritten.items() if k != "context"} == {
        k: v for k, v in document.items() if k != "context"
    }


def test_a_page_without_the_markers_is_refused():
    with pytest.raises(ValueError, match="must hold the lines"):
        settings_doc.render("# Settings\n")


def settings_rows(text: str) -> list[tuple[str, str]]:
    """``(key, default shown)`` of table rows such as ``| `ecs.capacity` | `on_demand` | ... |``
    (one key, or ``a` / `b`` with ``x / y``), for keys that are settings."""
    defaults, found = default_context(), []
    for keys, shown in re.findall(
        r"^\| (`[a-z_.]+`(?: / `[a-z_.]+`)*) \| ([^|]+) \|", text, flags=re.M
    ):
        names = re.findall(r"`([a-z_.]+)`", keys)
        values = [value.strip().strip("`") for value in shown.split(" / ")]
        if all(name in defaults for name in names) and len(values) == len(names):
            found += zip(names, values, strict=True)
    return found


@pytest.mark.parametrize(
    "page", [page for page in DOCS if page.name != "settings.md"], ids=lambda page: page.name
)
def test_the_defaults_in_other_pages_tables_are_the_dataclasses(page):
    defaults = default_context()
    for name, value in settings_rows(page.read_text()):
        expected = defaults[name]
        assert (value if isinstance(expected, str) else json.loads(value)) == expected, (
            page.name,
            name,
        )


def test_the_ecs_page_has_its_table_of_settings():
    names = {name for name, _ in settings_rows((ROOT / "docs" / "ecs.md").read_text())}
    assert {
        "voxtral.target",
        "ecs.instance_type",
        "ecs.min_tasks",
        "ecs.max_tasks",
        "sonic.health_path",
    } <= names
