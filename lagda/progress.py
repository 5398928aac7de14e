"""A tqdm bar driven by the `progress(done, total)` callbacks of long library calls."""

from __future__ import annotations


class FieldProgress:
    """Callable `progress(done, total)` that shows a bar of fields; the bar appears on the first call.

    Creating the bar lazily means an early error (bad input) prints no empty bar.
    """

    def __init__(self, desc: str):
        self.desc = desc
        self.bar = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, unit="field", desc=self.desc, dynamic_ncols=True)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
