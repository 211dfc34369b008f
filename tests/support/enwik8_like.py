"""A small file laid out like enwik8 (a MediaWiki XML dump of English Wikipedia), generated, with what a cleaning
of it would have to handle: XML tags and attributes, wiki links with and without labels, templates, tables, image
and category links, ''italic'' and '''bold''' marks, headings, escaped HTML (``&lt;ref&gt;``) and entities
(``&amp;``, ``&quot;``, ``&nbsp;``), URLs, non-ASCII text of one to four bytes a character, tabs, a U+FFFD that is
text, and line ends of every kind (``\\n``, ``\\r\\n``, a lone ``\\r``), some of them where a 512-character piece
ends. Deterministic in its seed."""

from __future__ import annotations

import random
import zipfile
from pathlib import Path

HEADER = (
    '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.3/" xml:lang="en">\n'
    "  <siteinfo>\n    <sitename>Wikipedia</sitename>\n    <base>http://en.wikipedia.org/wiki/Main_Page</base>\n"
    '    <namespaces>\n      <namespace key="-2">Media</namespace>\n      <namespace key="14">Category</namespace>\n'
    "    </namespaces>\n  </siteinfo>\n"
)
WORDS = (
    "the of and in a to was is for as on by with he that from at his an were are which this also be it first "
    "city river war album king church population state university born known north school"
).split()
NAMES = ["Anarchism", "Albedo", "Café society", "Zürich", "Kraków", "東京", "Ελλάδα", "Москва", "Aristotle"]
LINE_ENDS = ["\n"] * 8 + ["\r\n", "\r"]


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(4, 14))]
    marks = [
        lambda w: f"[[{rng.choice(NAMES)}]]",
        lambda w: f"[[{rng.choice(NAMES)}|{w}]]",
        lambda w: f"''{w}''",
        lambda w: f"'''{w}'''",
        lambda w: f"{{{{lang|fr|{w}}}}}",
        lambda w: f"{w}&lt;ref&gt;{{{{cite web|url=http://www.example.org/{w}|title={w}}}}}&lt;/ref&gt;",
        lambda w: f"{w}&amp;{rng.choice(WORDS)}",
        lambda w: f"&quot;{w}&quot;",
        lambda w: f"{w}&amp;nbsp;km",
        lambda w: f"{w} (\u00e9t\u00e9, \u4e2d\u6587, \U0001d11e)",
        lambda w: f"{w}\t\ufffd",
    ]
    for index in rng.sample(range(len(words)), k=min(3, len(words))):
        words[index] = rng.choice(marks)(words[index])
    text = " ".join(words)
    return text[0].upper() + text[1:] + "."


def page(rng: random.Random, number: int) -> list[str]:
    """One ``<page>``: its lines, each without its line end."""
    title = rng.choice(NAMES)
    body = [
        f"{{{{Infobox {rng.choice(WORDS)} | name = {title} | image = [[Image:{title}.jpg|200px]] }}}}",
        f"'''{title}''' is {' '.join(sentence(rng) for _ in range(2))}",
        f"=={rng.choice(WORDS).capitalize()}==",
        *(sentence(rng) for _ in range(rng.randint(2, 6))),
        '{| class="wikitable"',
        f"|-\n! {rng.choice(WORDS)} !! {rng.choice(WORDS)}",
        f"| {rng.randint(1, 9999)} || [http://www.example.org/{number} {rng.choice(WORDS)}]",
        "|}",
        "* " + sentence(rng),
        f"[[Category:{rng.choice(NAMES)}]]",
        f"[[de:{title}]]",
    ]
    return [
        "  <page>",
        f"    <title>{title}</title>",
        f"    <id>{number}</id>",
        "    <revision>",
        f"      <id>{1000 + number}</id>",
        "      <timestamp>2006-03-04T01:41:25Z</timestamp>",
        f"      <contributor><username>User{number}</username><id>{number}</id></contributor>",
        f'      <text xml:space="preserve">{body[0]}',
        *body[1:],
        "</text>",
        "    </revision>",
        "  </page>",
    ]


def enwik8_like_text(pages: int = 30, seed: int = 0) -> str:
    """The text of the file, line ends as written (a few hundred lines for 30 pages)."""
    rng = random.Random(seed)
    lines = [line for number in range(pages) for line in page(rng, number)]
    return HEADER + "".join(line + rng.choice(LINE_ENDS) for line in lines)


def write_enwik8_like(folder: Path, pages: int = 30, seed: int = 0) -> dict[str, Path]:
    """The file, UTF-8, as ``folder/enwik8``, and zipped like the Hutter Prize's (``folder/enwik8.zip``)."""
    raw = folder / "enwik8"
    raw.write_bytes(enwik8_like_text(pages, seed).encode("utf-8"))
    archive = folder / "enwik8.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zipped:
        zipped.write(raw, "enwik8")
    return {"raw": raw, "zip": archive}
