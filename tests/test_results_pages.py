"""The results pages open with summary tables made from the tracked results/*.csv (experiments/common/results_pages.py):
a page and its CSV files agree, and the block is replaced in place, not duplicated. Every page of the site and the
README has a heading at least every 60 lines and no paragraph over 1000 characters."""

import pytest

from experiments.common import results_pages


@pytest.mark.parametrize("page", sorted(results_pages.PAGES))
def test_each_page_summary_matches_its_csv_files(page):
    text = (results_pages.ROOT / page).read_text()
    assert text.count(results_pages.BEGIN) == 1 and text.count(results_pages.END) == 1, page
    assert results_pages.with_summary(text, results_pages.summary_block(page)) == text, (
        f"{page} disagrees with its CSV files: run python -m experiments.common.results_pages")


def test_a_changed_csv_makes_its_page_stale(tmp_path):
    page = "docs/results/ocean.md"
    for path in [page, *(s.csv for s in results_pages.PAGES[page])]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text((results_pages.ROOT / path).read_text())
    csv = tmp_path / results_pages.PAGES[page][0].csv
    assert results_pages.summary_block(page, tmp_path) == results_pages.summary_block(page)
    csv.write_text(csv.read_text().replace("0.89004", "0.99004", 1))  # one flow's error at 16 drifters
    block = results_pages.summary_block(page, tmp_path)
    assert "| 16 | 0.929 |" in block  # the mean over the 2 flows moves by 0.05: (0.99004 + 0.8671) / 2
    assert results_pages.with_summary((tmp_path / page).read_text(), block) != (tmp_path / page).read_text()


def test_the_block_goes_below_the_title_then_is_replaced_in_place():
    block = f"{results_pages.BEGIN}\n\ntable\n\n{results_pages.END}"
    once = results_pages.with_summary("# Title\n\nbody\n", block)
    assert once == f"# Title\n\n{block}\n\nbody\n"
    assert results_pages.with_summary(once, block.replace("table", "new")) == once.replace("table", "new")
    with pytest.raises(ValueError, match="title"):
        results_pages.with_summary("no title\n", block)


def _blocks(text: str):
    """Yields (first line number, kind, text) of each heading and paragraph of a Markdown page: a paragraph is a
    run of non-blank lines outside code fences, tables and HTML lines; a list item starts one of its own."""
    lines, inside, start, para = text.split("\n"), False, 0, []
    for number, line in enumerate(lines + [""], start=1):
        if line.startswith("```"):
            inside, para = not inside, []
            continue
        if inside:
            continue
        ends = not line.strip() or line.startswith(("#", "|", "<")) or line.startswith("- ")
        if ends and para:
            yield start, "paragraph", " ".join(para)
            para = []
        if line.startswith("#"):
            yield number, "heading", line
        elif line.strip() and not line.startswith(("|", "<")):
            start = number if not para else start
            para.append(line.strip())


# every page of the site, and the README: a newcomer finds their way by the headings, and reads short paragraphs
PAGES = sorted(str(p.relative_to(results_pages.ROOT)) for p in (results_pages.ROOT / "docs").rglob("*.md"))


@pytest.mark.parametrize("page", [*PAGES, "README.md"])
def test_a_page_has_a_heading_every_60_lines_and_short_paragraphs(page):
    text = (results_pages.ROOT / page).read_text()
    headings = [n for n, kind, _ in _blocks(text) if kind == "heading"] + [len(text.split("\n")) + 1]
    assert not [(a, b) for a, b in zip(headings, headings[1:]) if b - a > 60], "sections of over 60 lines"
    assert not [(n, len(p)) for n, kind, p in _blocks(text) if kind == "paragraph" and len(p) > 1000]



@pytest.mark.parametrize("page", [*PAGES, "README.md"])
def test_a_page_is_under_15000_characters(page):
    """A page a newcomer reads in one sitting: one that grows past it is split by question."""
    assert len((results_pages.ROOT / page).read_text()) < 15_000


@pytest.mark.parametrize("page", [p for p in PAGES if p.startswith("docs/results/") and not p.endswith("README.md")])
def test_a_results_page_opens_with_its_table(page):
    """A results page answers its question at the top: a table within its first 15 lines."""
    lines = (results_pages.ROOT / page).read_text().split("\n")[:15]
    assert lines[0].startswith("# ") and any(line.startswith("|") for line in lines)

def test_the_page_checker_sees_long_paragraphs_and_sections():
    long = "# T\n\n" + "word " * 250 + "\n"
    assert [len(p) for _, kind, p in _blocks(long) if kind == "paragraph"] == [len("word " * 250) - 1]
    listed = "# T\n\n- one\n- two\n\n```\n# not a heading\n```\n"
    assert [(n, kind) for n, kind, _ in _blocks(listed)] == [(1, "heading"), (3, "paragraph"), (4, "paragraph")]
