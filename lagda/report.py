"""Tables printed by the commands: one markdown table for scores of methods, splits or runs."""

from __future__ import annotations


def format_table(rows: dict, columns, first: str = "method", number: str = "{:.3g}") -> str:
    """Returns a markdown table: one row per `rows` key, one column per (key, label) of `columns`.

    Args:
        rows: `{row name: {column key: value}}`; a missing key prints "-".
        columns: `((key, label), ...)` in print order.
        first: the label of the row-name column.
        number: format of a value (str.format), e.g. "{:.3g}" or "{:.2%}".
    """
    lines = [f"| {first} | " + " | ".join(label for _, label in columns) + " |", "|---|" + "---|" * len(columns)]
    for name, values in rows.items():
        cells = [number.format(values[key]) if key in values else "-" for key, _ in columns]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
