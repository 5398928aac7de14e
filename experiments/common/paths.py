"""Where the studies read and write: ROOT, the checkout's root (results/, runs/, data/ and docs/ lie under it)."""

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
