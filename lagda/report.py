"""What the commands print: markdown tables of scores (methods, splits, runs), counts and spans of time in words."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """Returns "n noun" in the number it takes ("1 tile", "0 tiles", "2 velocities" given that plural).

    >>> counted(1, "tile"), counted(3, "velocity", "velocities")
    ('1 tile', '3 velocities')
    """
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def duration(seconds: float) -> str:
    """Returns a span of time in the unit a drifter user reads it in: seconds under 2 minutes, minutes under an hour,
    hours under 2 days, else days (3 significant digits).

    >>> duration(1800.0), duration(45.0), duration(3600.0), duration(13 * 3600.0), duration(4.01 * 86400)
    ('30 min', '45 s', '1 h', '13 h', '4.01 days')
    """
    seconds = round(float(seconds), 3)  # a step of 3599.9999 s is 1 h
    for unit, size, limit in (("s", 1.0, 120.0), ("min", 60.0, 3600.0), ("h", 3600.0, 2 * 86400.0)):
        if abs(seconds) < limit:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds / 86400.0:.3g} days"


def format_table(rows: dict, columns, first: str = "method", number: str = "{:.3g}") -> str:
    """Returns a markdown table: one row per `rows` key, one column per (key, label) of `columns`.

    Parameters
    ----------
    rows : dict
        `{row name: {column key: value}}`; a missing key prints "-".
    columns : sequence of (str, str)
        `((key, label), ...)` in print order.
    first : str, default "method"
        The label of the row-name column.
    number : str, default "{:.3g}"
        Format of a value (`str.format`), e.g. "{:.3g}" or "{:.2%}".

    Returns
    -------
    str
        The table, lines joined by newlines.

    Examples
    --------
    >>> print(format_table({"linear": {"error": 0.12345}, "hybrid": {}}, [("error", "relative error")]))
    | method | relative error |
    |---|---|
    | linear | 0.123 |
    | hybrid | - |
    """
    lines = [f"| {first} | " + " | ".join(label for _, label in columns) + " |", "|---|" + "---|" * len(columns)]
    for name, values in rows.items():
        cells = [number.format(values[key]) if key in values else "-" for key, _ in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
