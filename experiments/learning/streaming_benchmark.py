"""Training speed and peak memory, tracks in memory against tracks streamed from the file (--stream true).

Each mode trains the same run in a fresh process (`learned` preset, no evaluation) and reports
the samples per second of its last epoch (the first compiles) and the process's peak resident
memory; the ratio streamed / in-memory is printed. The reader thread of the training loop reads
batch i + 1 while step i runs, in both modes. `--cgroup DIR` (a cgroup v1 memory directory
with memory.limit_in_bytes set, root only) also runs both modes inside that memory limit: a
dataset larger than the limit trains only streamed.

    python -m experiments.learning.streaming_benchmark --train small_train.nc --epochs 2
    mkdir /sys/fs/cgroup/memory/lagda && echo 1200M > /sys/fs/cgroup/memory/lagda/memory.limit_in_bytes
    python -m experiments.learning.streaming_benchmark --train big.nc --epochs 1 --cgroup /sys/fs/cgroup/memory/lagda
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import textwrap

from experiments.common.paths import ROOT

CHILD = textwrap.dedent("""
    import json, resource
    from lagda.learning.config import learned
    from lagda.learning.train import train
    run = train(learned(set_head="ridge", epochs={epochs}, eval_library=0, stream={stream}), {train!r}, None,
                {run_dir!r}, progress=False)
    last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    print(json.dumps({{"samples_per_s": last["samples_per_s"],
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
""")


def measure(train_file: str, epochs: int, stream: bool, cgroup: str | None = None) -> dict:
    """Returns {samples_per_s, peak_rss_mb} of one training run in a fresh process, or {"failed": why}.

    cgroup: a cgroup v1 directory the process is moved into as soon as it starts.
    """
    with tempfile.TemporaryDirectory() as tmp:
        script = CHILD.format(epochs=epochs, stream=stream, train=train_file,
                              run_dir=str(pathlib.Path(tmp) / "run"))
        # run in the checkout's root, as `python -m` does, so that the child imports this checkout's lagda
        proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        if cgroup:
            (pathlib.Path(cgroup) / "cgroup.procs").write_text(str(proc.pid))
        out, err = proc.communicate()
    if proc.returncode != 0:
        return {"failed": f"exit {proc.returncode}" + (" (killed: out of memory)" if proc.returncode == -9 else "")
                + (f": {err.strip().splitlines()[-1]}" if err.strip() else "")}
    return json.loads(out.strip().splitlines()[-1])


def describe(name: str, result: dict) -> str:
    if "failed" in result:
        return f"{name}: failed, {result['failed']}"
    return f"{name}: {result['samples_per_s']:.0f} samples/s, peak RSS {result['peak_rss_mb']:.0f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", required=True, help="a lagda dataset file")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--cgroup", default=None, help="also run both modes inside this cgroup v1 memory directory")
    args = parser.parse_args()
    memory = measure(args.train, args.epochs, False)
    stream = measure(args.train, args.epochs, True)
    print(describe("in memory", memory))
    print(describe("streamed", stream))
    if "failed" not in memory and "failed" not in stream:
        print(f"streamed / in memory: speed {stream['samples_per_s'] / memory['samples_per_s']:.3f}, "
              f"peak memory {stream['peak_rss_mb'] / memory['peak_rss_mb']:.3f}")
    if args.cgroup:
        limit = int((pathlib.Path(args.cgroup) / "memory.limit_in_bytes").read_text()) / 2**20
        capped = {name: measure(args.train, args.epochs, name == "streamed", args.cgroup)
                  for name in ("in memory", "streamed")}
        for name, result in capped.items():
            print(describe(f"{name}, limit {limit:.0f} MB", result))
        if "failed" not in capped["streamed"] and "failed" not in memory:
            print(f"streamed within the limit / in memory without it: speed "
                  f"{capped['streamed']['samples_per_s'] / memory['samples_per_s']:.3f}")


if __name__ == "__main__":
    main()
