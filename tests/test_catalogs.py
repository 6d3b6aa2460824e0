"""The gettext catalogs: complete for every language, true to the code, and each drift caught."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from resumable_core.lab import catalogs, i18n

TRANSLATED = [lang for lang in i18n.LANGUAGES if lang != i18n.DEFAULT]
ALL = catalogs._all_catalogs()


@pytest.mark.parametrize("domain", sorted(ALL))
@pytest.mark.parametrize("lang", TRANSLATED)
def test_every_message_the_code_uses_is_translated_and_none_is_stale(domain: str, lang: str) -> None:
    """Each catalog's .po has every message its code uses, translated, with the same placeholders, and no stale one."""
    assert catalogs.problems(ALL[domain], lang) == []


@pytest.mark.slow
@pytest.mark.parametrize("domain", sorted(ALL))
def test_update_changes_no_byte_of_a_current_catalog(domain: str, tmp_path: Path) -> None:
    """Rewriting a current catalog from the code gives the committed file back, byte for byte."""
    catalog = ALL[domain]
    copy = i18n.Catalog(catalog.domain, tmp_path, catalog.sources)
    for lang in TRANSLATED:
        copy.po_path(lang).parent.mkdir(parents=True)
        shutil.copy(catalog.po_path(lang), copy.po_path(lang))
        catalogs.update(copy, lang)
        assert copy.po_path(lang).read_bytes() == catalog.po_path(lang).read_bytes()


def _planted(tmp_path: Path, code: str, po_entries: str) -> i18n.Catalog:
    root = tmp_path / "pkg"
    (root / "w").mkdir(parents=True)
    (root / "w" / "m.py").write_text(code, encoding="utf-8")
    catalog = i18n.Catalog("planted", tmp_path / "locale", ("w/**/*.py",))
    po = catalog.po_path("ko")
    po.parent.mkdir(parents=True)
    po.write_text(
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=utf-8\\n"\n\n' + po_entries, encoding="utf-8"
    )
    return catalog


def test_a_planted_missing_message_is_caught(tmp_path: Path) -> None:
    """A message the code uses that the .po lacks is reported, with the command that adds it."""
    catalog = _planted(tmp_path, '_("one email sent")\n', "")
    [problem] = catalogs.problems(catalog, "ko", tmp_path / "pkg")
    assert "missing 'one email sent'" in problem and "catalogs update" in problem


def test_a_planted_untranslated_message_is_caught(tmp_path: Path) -> None:
    """An entry with an empty msgstr is reported as untranslated."""
    catalog = _planted(tmp_path, '_("one email sent")\n', 'msgid "one email sent"\nmsgstr ""\n')
    [problem] = catalogs.problems(catalog, "ko", tmp_path / "pkg")
    assert "untranslated 'one email sent'" in problem


def test_a_planted_stale_message_is_caught(tmp_path: Path) -> None:
    """An entry no code uses any more is reported as stale."""
    catalog = _planted(
        tmp_path,
        '_("two emails sent")\n',
        'msgid "two emails sent"\nmsgstr "이메일 두 통"\n\nmsgid "gone"\nmsgstr "사라짐"\n',
    )
    [problem] = catalogs.problems(catalog, "ko", tmp_path / "pkg")
    assert "stale 'gone'" in problem


def test_a_planted_placeholder_difference_is_caught(tmp_path: Path) -> None:
    """A translation whose format fields differ from the English is reported with both sets."""
    catalog = _planted(tmp_path, '_("{count} emails sent")\n', 'msgid "{count} emails sent"\nmsgstr "이메일 {n}통"\n')
    [problem] = catalogs.problems(catalog, "ko", tmp_path / "pkg")
    assert "placeholders differ" in problem and "['count']" in problem and "['n']" in problem


def test_a_planted_fuzzy_message_is_caught(tmp_path: Path) -> None:
    """A fuzzy entry (a guess a translator has not checked) is reported."""
    catalog = _planted(tmp_path, '_("sent")\n', '#, fuzzy\nmsgid "sent"\nmsgstr "보냄"\n')
    [problem] = catalogs.problems(catalog, "ko", tmp_path / "pkg")
    assert "fuzzy 'sent'" in problem


def test_the_setting_then_the_locale_choose_the_language(monkeypatch: pytest.MonkeyPatch) -> None:
    """RESUMABLE_LANG wins; else the notebook's edition folder; else the locale's language if the kit has it; else English."""
    for variable in ("RESUMABLE_LANG", "JPY_SESSION_NAME", "LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(variable, raising=False)
    assert i18n.language() == "en"
    monkeypatch.setenv("JPY_SESSION_NAME", "/home/learner/kit/lessons/ko/01_skeleton_resume.ipynb")
    assert i18n.language() == "ko"  # the kernel of a Korean edition's notebook
    monkeypatch.setenv("JPY_SESSION_NAME", "/home/learner/kit/lessons/01_skeleton_resume.ipynb")
    assert i18n.language() == "en"
    monkeypatch.setenv("LANG", "ko_KR.UTF-8")
    assert i18n.language() == "ko"
    monkeypatch.setenv("LC_ALL", "C.UTF-8")  # a locale with no language of the kit: English
    assert i18n.language() == "en"
    monkeypatch.setenv("RESUMABLE_LANG", "ko")
    assert i18n.language() == "ko"
    monkeypatch.setenv("RESUMABLE_LANG", "fr")
    with pytest.raises(ValueError, match="RESUMABLE_LANG='fr' is not a language of this kit: set it to one of en, ko"):
        i18n.language()


def test_a_translated_kits_library_chooses_its_language_before_the_locale(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A kit whose library says `ko` (the Korean kit) speaks Korean with an English locale, its notebooks sitting in
    no ko/ folder; RESUMABLE_LANG still wins; a library that says nothing leaves the locale to choose."""
    for variable in ("RESUMABLE_LANG", "JPY_SESSION_NAME", "LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    (tmp_path / "kit-language").write_text("ko\n", encoding="utf-8")
    monkeypatch.setattr(i18n, "KIT_LANGUAGE", tmp_path / "kit-language")
    assert i18n.language() == "ko"
    monkeypatch.setenv("JPY_SESSION_NAME", "/home/learner/student-kit-ko/lessons/01_skeleton_resume.ipynb")
    assert i18n.language() == "ko"
    monkeypatch.setenv("RESUMABLE_LANG", "en")
    assert i18n.language() == "en"
    monkeypatch.delenv("RESUMABLE_LANG")
    monkeypatch.setattr(i18n, "KIT_LANGUAGE", tmp_path / "none")
    assert i18n.language() == "en"


def test_a_reveal_speaks_korean_when_asked(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """lab.reveal's own words come from the catalog: Korean with RESUMABLE_LANG=ko, English without."""
    from resumable_core import lab

    monkeypatch.setenv("RESUMABLE_LANG", "ko")
    lab.reveal(3, 2, why="-", hint="-")
    assert "답은 2입니다" in capsys.readouterr().out
    monkeypatch.setenv("RESUMABLE_LANG", "en")
    lab.reveal(3, 2, why="-", hint="-")
    assert "You predicted 3; it is 2." in capsys.readouterr().out


@pytest.mark.slow
def test_the_check_command_passes_on_this_repository(capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m resumable_core.lab.catalogs check` (the README's command) prints nothing and exits 0 here."""
    assert catalogs.main(["check"]) == 0
    assert capsys.readouterr().out == ""
