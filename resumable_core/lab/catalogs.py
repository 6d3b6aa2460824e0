"""Keeping the gettext catalogs true to the code: extract, update, and list what is wrong.

`python -m resumable_core.lab.catalogs update` rewrites every catalog's `.po` files from the source
(new messages arrive untranslated, gone ones are dropped, translations are kept);
`python -m resumable_core.lab.catalogs check` lists every problem `tests/test_catalogs.py` fails on:
a message the code uses that a language lacks, one translated for code that no longer uses it
(stale), an untranslated or fuzzy entry, and placeholders that differ between the languages.
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import string
import sys
from collections.abc import Iterator
from pathlib import Path

from babel.messages.catalog import Catalog as PoCatalog
from babel.messages.extract import extract, extract_from_file
from babel.messages.pofile import read_po, write_po

from resumable_core.lab import i18n

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
FIXED_DATE = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
#: A message id: the text, or a plural's (singular, plural).
MessageId = str | tuple[str, ...]
KEYWORDS = {"_": None, "N_": None, "gettext": None, "ngettext": (1, 2), "say": None}


def _all_catalogs() -> dict[str, i18n.Catalog]:
    # The course wing registers its catalogs on import; the student kit may lack some of them.
    for module in (
        "resumable_core.course.i18n",
        "resumable_core.course.hidden.i18n",
        "resumable_core.course.grading.i18n",
    ):
        try:
            __import__(module)
        except ImportError:
            continue
    return dict(i18n.CATALOGS)


def source_files(catalog: i18n.Catalog, root: Path = PACKAGE_ROOT) -> list[Path]:
    """The source files `catalog` is extracted from."""
    files: set[Path] = set()
    for pattern in catalog.sources:
        files.update(p.resolve() for p in root.glob(pattern) if p.suffix in (".py", ".ipynb"))
    return sorted(files)


def extracted(catalog: i18n.Catalog, root: Path = PACKAGE_ROOT) -> dict[MessageId, list[str]]:
    """Every message id the code of `catalog` uses (a plural's is its pair), with where it is used."""
    found: dict[MessageId, list[str]] = {}
    for path in source_files(catalog, root):
        for lineno, message, _comments, _context in _messages_in(path):
            key = message if isinstance(message, str) else tuple(message)
            if not key:
                continue
            found.setdefault(key, []).append(f"{path.relative_to(root.parent)}:{lineno}")
    return found


def _messages_in(path: Path) -> Iterator[tuple[int, str | tuple[str, ...], list[str], str | None]]:
    # A notebook's messages are its code cells' (`lab.say("...")`); a line number counts from the cell.
    if path.suffix != ".ipynb":
        yield from extract_from_file("python", str(path), keywords=KEYWORDS)
        return
    notebook = json.loads(path.read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            source = "".join(cell["source"]).encode("utf-8")
            yield from extract("python", io.BytesIO(source), keywords=KEYWORDS)


def fields(text: str) -> set[str]:
    """The `str.format` fields of `text` (`{count}`, `{path!r}` -> count, path)."""
    try:
        return {name for _literal, name, _spec, _conv in string.Formatter().parse(text) if name is not None}
    except ValueError:
        return {"<not a format string>"}


def read(catalog: i18n.Catalog, lang: str) -> PoCatalog:
    """The `.po` file of `lang` (an empty catalog when there is none yet)."""
    path = catalog.po_path(lang)
    if not path.exists():
        return PoCatalog(locale=lang, domain=catalog.domain)
    with path.open("rb") as f:
        return read_po(f)


def problems(catalog: i18n.Catalog, lang: str, root: Path = PACKAGE_ROOT) -> list[str]:
    """Everything wrong with `lang`'s catalog for `catalog`'s code, one line each (none: it is complete)."""
    used = extracted(catalog, root)
    po = read(catalog, lang)
    out: list[str] = []
    entries = {m.id if isinstance(m.id, str) else tuple(m.id): m for m in po if m.id}
    for key, where in used.items():
        entry = entries.get(key)
        if entry is None:
            out.append(
                f"{catalog.domain}/{lang}: missing {key!r} (used at {where[0]}); run `python -m resumable_core.lab.catalogs update`, then translate it"
            )
            continue
        strings = [entry.string] if isinstance(entry.string, str) else list(entry.string or ())
        if not strings or not all(strings):
            out.append(f"{catalog.domain}/{lang}: untranslated {key!r} (used at {where[0]})")
        elif entry.fuzzy:
            out.append(f"{catalog.domain}/{lang}: fuzzy {key!r}: check the translation and remove the fuzzy flag")
        else:
            ids = [key] if isinstance(key, str) else list(key)
            wanted = set().union(*(fields(i) for i in ids))
            for s in strings:
                if fields(s) != wanted:
                    out.append(
                        f"{catalog.domain}/{lang}: placeholders differ in {key!r}: "
                        f"English has {sorted(wanted)}, the translation has {sorted(fields(s))}"
                    )
    for key in entries.keys() - used.keys():
        out.append(
            f"{catalog.domain}/{lang}: stale {key!r}: no code uses it; run `python -m resumable_core.lab.catalogs update`"
        )
    return out


def update(catalog: i18n.Catalog, lang: str, root: Path = PACKAGE_ROOT) -> Path:
    """Rewrite `lang`'s `.po` for `catalog` from the code: keep translations, add new ids empty, drop stale ones."""
    old = read(catalog, lang)
    kept = {m.id if isinstance(m.id, str) else tuple(m.id): m for m in old if m.id}
    new = PoCatalog(
        locale=lang,
        domain=catalog.domain,
        project="Resumable Agents",
        version="1",
        copyright_holder="the Resumable Agents authors",
        last_translator="the Resumable Agents authors",
        language_team=f"{lang}",
        # Fixed dates: an update that changes no message changes no byte.
        creation_date=FIXED_DATE,
        revision_date=FIXED_DATE,
        fuzzy=False,
        header_comment=(
            f"# The {lang} messages of Resumable Agents' {catalog.domain} catalog.\n"
            "# Edit msgstr lines only: `python -m resumable_core.lab.catalogs update` rewrites the rest from the code."
        ),
    )
    for key, where in sorted(extracted(catalog, root).items(), key=lambda kv: kv[1][0]):
        previous = kept.get(key)
        locations = [(w.rsplit(":", 1)[0], int(w.rsplit(":", 1)[1])) for w in where]
        new.add(
            key,
            string=previous.string if previous else ("" if isinstance(key, str) else ("", "")),
            locations=locations,
            flags=previous.flags if previous else (),
        )
    path = catalog.po_path(lang)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        write_po(f, new, width=100, omit_header=False, sort_output=False, include_lineno=False)
    return path


def main(argv: list[str] | None = None) -> int:
    """`update` or `check` every catalog's translated languages."""
    parser = argparse.ArgumentParser(prog="python -m resumable_core.lab.catalogs", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("update", "check"))
    args = parser.parse_args(argv)
    found: list[str] = []
    for catalog in _all_catalogs().values():
        for lang in i18n.TRANSLATIONS:
            if args.action == "update":
                print(update(catalog, lang))
            else:
                found += problems(catalog, lang)
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
