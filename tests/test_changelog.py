"""The release record: `lagda --version` prints the package's version, and CHANGELOG.md (Keep a Changelog) has
an Unreleased section, a section for that version, and every deprecated option name with its new name and
the release that removes it."""

import re
import subprocess
import sys
from pathlib import Path

import lagda
from lagda.assimilation.methods.config import RENAMED

ROOT = Path(__file__).resolve().parents[1]


def _pyproject_version() -> str:
    (version,) = re.findall(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), flags=re.M)
    return version


def test_version_flag_prints_the_package_version():
    done = subprocess.run([sys.executable, "-m", "lagda", "--version"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"lagda {lagda.__version__}"
    assert lagda.__version__ == _pyproject_version()


def _sections(text: str) -> dict[str, str]:
    """Returns {release heading name: its text} for the `## [name]` headings of a Keep a Changelog file."""
    parts = re.split(r"^## \[([^\]]+)\].*$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_changelog_records_this_version_and_the_renamed_options():
    sections = _sections((ROOT / "CHANGELOG.md").read_text())
    assert list(sections)[0] == "Unreleased"
    assert lagda.__version__ in sections
    major, minor, _ = (int(x) for x in lagda.__version__.split("."))
    release = sections[lagda.__version__]
    deprecated = release.split("### Deprecated", 1)[1]
    # the config's notes say the old names go "in the next release": the changelog names it
    assert f"removed in {major}.{minor + 1}.0" in deprecated
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\s*\| `(\w+)` / `--[\w-]+` \| `(\w+)` / `--[\w-]+` \|",
                                                        release, flags=re.M)}
    assert rows == {old: new for old, (_, new) in RENAMED.items()}
