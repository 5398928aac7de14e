"""Training speed and peak memory, tracks in memory against tracks streamed from the file (--stream true).

Each mode trains the same run in a fresh process (`learned` preset, no evaluation) and reports
the samples per second of its last epoch (the first compiles) and the process's peak resident
memory; the ratio streamed / in-memory is printed. The reader thread of the training loop reads
batch i + 1 while step i runs, in both modes.

    python3 experiments/streaming_benchmark.py --train small_train.nc --epochs 2
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent("""
    import json, resource, sys
    sys.path.insert(0, {root!r})
    from lagda.learning.config import learned
    from lagda.learning.train import train
    run = train(learned(epochs={epochs}, eval_library=0, stream={stream}), {train!r}, None, {run_dir!r}, progress=False)
    last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    print(json.dumps({{"samples_per_s": last["samples_per_s"], "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
""")


def measure(train_file: str, epochs: int, stream: bool) -> dict:
    """Returns {samples_per_s, peak_rss_mb} of one training run in a fresh process."""
    with tempfile.TemporaryDirectory() as tmp:
        script = CHILD.format(root=str(ROOT), epochs=epochs, stream=stream, train=train_file, run_dir=str(pathlib.Path(tmp) / "run"))
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", required=True, help="a lagda dataset file")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    memory = measure(args.train, args.epochs, False)
    stream = measure(args.train, args.epochs, True)
    print(f"in memory: {memory['samples_per_s']:.0f} samples/s, peak RSS {memory['peak_rss_mb']:.0f} MB")
    print(f"streamed:  {stream['samples_per_s']:.0f} samples/s, peak RSS {stream['peak_rss_mb']:.0f} MB")
    print(f"streamed / in memory: speed {stream['samples_per_s'] / memory['samples_per_s']:.3f}, "
          f"peak memory {stream['peak_rss_mb'] / memory['peak_rss_mb']:.3f}")


if __name__ == "__main__":
    main()
