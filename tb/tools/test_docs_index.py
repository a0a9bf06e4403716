"""The documentation's index and links, checked on the Markdown text (docs/README.md).

* Every page ``docs/*.md`` is listed (linked) in ``docs/README.md``.
* Every relative link of ``README.md`` and of every ``docs/*.md`` resolves: the file exists, and
  an anchor (``PAGE.md#anchor`` or ``#anchor``) is the GitHub slug of one of that page's headings.
* No heading of ``docs/*.md`` names an issue number or a commit hash: headings name topics; a
  commit belongs in the provenance line of a generated table, history in CHANGELOG.md.

Headings and links inside fenced code blocks are not read. Each check is shown to fail on a
synthetic tree in ``tmp_path``.
"""

import re

from scin.sim.toolchain import REPO_ROOT as ROOT


_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) and ![alt](target); the target ends at the first space or ')'.
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_ISSUE = re.compile(r"\bissues?\s*#?\d+|(?<![\w&])#\d+\b", re.IGNORECASE)
_HEX = re.compile(r"\b[0-9a-f]{7,40}\b")


def prose_lines(text):
    """The lines of ``text`` outside fenced code blocks, as ``(line number, line)``."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            out.append((number, line))
    return out


def headings(text):
    """``(line number, title)`` of every ATX heading of ``text`` outside code blocks."""
    return [(n, m.group(2)) for n, line in prose_lines(text) if (m := _HEADING.match(line))]


def github_slug(title):
    """The anchor GitHub gives the heading ``title``: lower case, markup and punctuation other
    than ``-`` and ``_`` dropped, each space a ``-`` (:func:`anchors` numbers duplicates)."""
    title = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", title)  # a link keeps its text
    title = re.sub(r"<[^>]+>", "", title).lower()
    return "".join(c for c in title if c.isalnum() or c in "-_ ").replace(" ", "-")


def anchors(text):
    """Every anchor of a page: its headings' slugs, the n-th repeat of a slug suffixed ``-n``."""
    seen, out = {}, set()
    for _, title in headings(text):
        slug = github_slug(title)
        out.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return out


def links(text):
    """``(line number, target)`` of every Markdown link and image of ``text`` outside code."""
    return [(n, m.group(1)) for n, line in prose_lines(text) for m in _LINK.finditer(line)]


def broken_links(page, root):
    """One message per relative link of ``page`` (a path under ``root``) that does not resolve."""
    out = []
    for number, target in links(page.read_text()):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
            continue  # https:, mailto: and the like: not checked here
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(root)}:{number}: {target}"
        if not dest.exists():
            out.append(f"{where}: no file {path}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            out.append(f"{where}: no heading of {dest.name} has the anchor #{anchor}")
    return out


def history_headings(page, root):
    """One message per heading of ``page`` that names an issue number or a commit hash (seven
    to forty hex digits with at least one digit and one letter)."""
    out = []
    for number, title in headings(page.read_text()):
        hashes = [w for w in _HEX.findall(title)
                  if re.search(r"\d", w) and re.search(r"[a-f]", w)]
        if _ISSUE.search(title) or hashes:
            out.append(f"{page.relative_to(root)}:{number}: heading {title!r} names an issue "
                       f"or a commit; name its topic")
    return out


def unlisted_pages(root):
    """The pages ``docs/*.md`` that ``docs/README.md`` does not link to."""
    index = root / "docs" / "README.md"
    if not index.exists():
        return sorted(p.name for p in (root / "docs").glob("*.md"))
    listed = {(index.parent / target.partition("#")[0]).resolve()
              for _, target in links(index.read_text()) if target.partition("#")[0]}
    return sorted(p.name for p in (root / "docs").glob("*.md")
                  if p.name != "README.md" and p.resolve() not in listed)


def problems(root):
    """Everything wrong with the documentation under ``root``, one message each."""
    pages = sorted((root / "docs").glob("*.md"))
    out = [f"docs/README.md does not list docs/{name}" for name in unlisted_pages(root)]
    for page in [root / "README.md", *pages]:
        out += broken_links(page, root)
    for page in pages:
        out += history_headings(page, root)
    return out


def test_the_docs_are_indexed_linked_and_titled_by_topic():
    assert problems(ROOT) == []


def test_github_slugs():
    assert github_slug("Small messages hop by hop (`scin bench-allreduce --hops`)") == \
        "small-messages-hop-by-hop-scin-bench-allreduce---hops"
    assert github_slug("Paired AllGather (`gather_pairs`)") == "paired-allgather-gather_pairs"
    assert github_slug("3. FP16 All-Reduce — `allreduce_fp16(x)`") == \
        "3-fp16-all-reduce--allreduce_fp16x"
    assert anchors("# A\n## A\n```\n# A\n```\n## A\n") == {"a", "a-1", "a-2"}


def _tree(tmp_path, pages, readme="# Project\n"):
    """A repository under ``tmp_path`` with ``README.md`` and ``docs/NAME`` for each page."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(readme)
    for name, text in pages.items():
        (tmp_path / "docs" / name).write_text(text)
    return tmp_path


GOOD = {
    "README.md": "# Docs\n\n- [ISA](ISA.md): the ISA\n- [Perf](PERF.md#latency): figures\n",
    "ISA.md": "# ISA\n\n## Push mode\n\nSee [latency](PERF.md#latency).\n",
    "PERF.md": "# Performance\n\n## Latency\n\nPush: [ISA](ISA.md#push-mode).\n",
}


def test_a_good_tree_passes(tmp_path):
    root = _tree(tmp_path, GOOD, "# P\n\n[docs](docs/README.md), [push](docs/ISA.md#push-mode)\n")
    assert problems(root) == []


def test_fails_on_a_page_missing_from_the_index(tmp_path):
    root = _tree(tmp_path, {**GOOD, "NEW.md": "# New\n"})
    assert problems(root) == ["docs/README.md does not list docs/NEW.md"]


def test_fails_on_a_missing_page_or_anchor(tmp_path):
    readme = "# P\n\n[gone](docs/GONE.md) and [anchor](docs/ISA.md#pull-mode)\n"
    pages = {**GOOD, "PERF.md": GOOD["PERF.md"] + "[here](#no-such)\n```\n[x](NOPE.md)\n```\n"}
    found = problems(_tree(tmp_path, pages, readme))
    assert found == [
        "README.md:3: docs/GONE.md: no file docs/GONE.md",
        "README.md:3: docs/ISA.md#pull-mode: no heading of ISA.md has the anchor #pull-mode",
        "docs/PERF.md:6: #no-such: no heading of PERF.md has the anchor #no-such",
    ]


def test_fails_on_an_issue_or_commit_in_a_heading(tmp_path):
    pages = {**GOOD, "ISA.md": "# ISA\n\n## Push mode (issue 18, item 5)\n\n## Trains, commit "
             "0c056f3\n\n## Fixed in #12\n\n## 1024 flits, fp16, 4096 B, deadbeef\n"}
    found = problems(_tree(tmp_path, pages))
    assert [line.split(" names")[0] for line in found] == [
        # the link to the heading's old anchor breaks as well
        "docs/PERF.md:5: ISA.md#push-mode: no heading of ISA.md has the anchor #push-mode",
        "docs/ISA.md:3: heading 'Push mode (issue 18, item 5)'",
        "docs/ISA.md:5: heading 'Trains, commit 0c056f3'",
        "docs/ISA.md:7: heading 'Fixed in #12'",
    ]
