"""The documentation site builds with warnings as errors (`mkdocs build --strict`): every page and link resolves,
the API reference is generated from the docstrings, and the tutorial notebooks execute without error."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_site_builds_strict_with_the_tutorials_executed(tmp_path):
    # TMPDIR: the tutorials' work folders (tempfile.mkdtemp) go under the test's own folder, not the machine's /tmp
    env = dict(os.environ, JAX_PLATFORMS="cpu", NO_MKDOCS_2_WARNING="1", TMPDIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    for name in ("simulate.generate_dataset", "simulate.simulate_tracks", "lagda.io.formats.read_tracks",
                 "lagda.learning.train.train", "lagda.learning.model.load_run",
                 "lagda.assimilation.assimilate.assimilate_file", "lagda.assimilation.methods.registry.METHODS"):
        assert f'id="{name}"' in api, name  # a heading generated from the object's docstring
    # each notebook ran: a line only its execution prints is on its page
    for name, printed in (("twin", "epoch 3: train loss"),
                          ("drifters", "tiles mapped"),  # lagda map's closing note
                          ("retrieval", "new/traj_to_coef")):  # the R@k table of the new flows
        tutorial = (tmp_path / "site" / "tutorials" / name / "index.html").read_text()
        assert printed in tutorial, name
