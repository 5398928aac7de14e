"""The results pages open with summary tables made from the tracked results/*.csv (experiments/results_pages.py):
a page and its CSV files agree, and the block is replaced in place, not duplicated."""

import pytest

from experiments import results_pages


@pytest.mark.parametrize("page", sorted(results_pages.PAGES))
def test_each_page_summary_matches_its_csv_files(page):
    text = (results_pages.ROOT / page).read_text()
    assert text.count(results_pages.BEGIN) == 1 and text.count(results_pages.END) == 1, page
    assert results_pages.with_summary(text, results_pages.summary_block(page)) == text, (
        f"{page} disagrees with its CSV files: run python -m experiments.results_pages")


def test_a_changed_csv_makes_its_page_stale(tmp_path):
    page = "docs/results/ocean.md"
    for path in [page, *(s.csv for s in results_pages.PAGES[page])]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text((results_pages.ROOT / path).read_text())
    csv = tmp_path / results_pages.PAGES[page][0].csv
    assert results_pages.summary_block(page, tmp_path) == results_pages.summary_block(page)
    csv.write_text(csv.read_text().replace("0.89017", "0.99017", 1))  # one flow's error at 16 drifters
    block = results_pages.summary_block(page, tmp_path)
    assert "| 16 | 0.929 |" in block  # the mean over the 2 flows moves by 0.05: (0.99017 + 0.86812) / 2
    assert results_pages.with_summary((tmp_path / page).read_text(), block) != (tmp_path / page).read_text()


def test_the_block_goes_below_the_title_then_is_replaced_in_place():
    block = f"{results_pages.BEGIN}\n\ntable\n\n{results_pages.END}"
    once = results_pages.with_summary("# Title\n\nbody\n", block)
    assert once == f"# Title\n\n{block}\n\nbody\n"
    assert results_pages.with_summary(once, block.replace("table", "new")) == once.replace("table", "new")
    with pytest.raises(ValueError, match="title"):
        results_pages.with_summary("no title\n", block)
