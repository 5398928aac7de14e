"""A study's table on its page: the text between a page's two marker comments, rewritten from the study's CSV."""

from __future__ import annotations

import pathlib
from typing import Callable


def write_page(csv_path: pathlib.Path, page: pathlib.Path, table: Callable[[pathlib.Path], str],
               marker: str) -> pathlib.Path:
    """Returns `page` with the text between its `marker` comments replaced by `table(csv_path)`.

    Parameters
    ----------
    csv_path : pathlib.Path
        The study's CSV file, passed to `table`.
    page : pathlib.Path
        A Markdown page holding the lines ``<!-- MARKER: begin -->`` and ``<!-- MARKER: end -->``.
    table : callable
        Returns the Markdown table of a CSV file.
    marker : str
        The markers' name, for example ``"basin-year table"``.

    Returns
    -------
    pathlib.Path
        `page`, rewritten: everything outside the markers as it was.

    Raises
    ------
    ValueError
        If the page lacks the markers.
    """
    begin, end = f"<!-- {marker}: begin -->", f"<!-- {marker}: end -->"
    text = page.read_text()
    if begin not in text or end not in text:
        raise ValueError(f"{page} has no {begin} ... {end} markers")
    head, rest = text.split(begin, 1)
    page.write_text(head + begin + "\n" + table(csv_path) + "\n" + end + rest.split(end, 1)[1])
    return page
