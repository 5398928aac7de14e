"""The `lagda` command: one argparse parser with subcommands, each a thin shell over a function."""

from __future__ import annotations

import argparse
import dataclasses
import sys


def _add_train_parser(subparsers) -> None:
    from lagda.config import PRESETS, TrainConfig

    p = subparsers.add_parser("train", help="train the trajectory encoder by contrastive learning")
    p.add_argument("--train", required=True, help="training dataset file (.nc)")
    p.add_argument("--test", default=None, help="test dataset file for retrieval metrics")
    p.add_argument("--run-dir", required=True, help="output run directory")
    p.add_argument("--preset", choices=sorted(PRESETS), default="paper", help="base config (default: paper)")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --run-dir")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    for field in dataclasses.fields(TrainConfig):
        flag = "--" + field.name.replace("_", "-")
        if field.type in ("bool", bool):
            p.add_argument(flag, type=lambda s: s.lower() in ("1", "true", "yes"), default=None,
                           metavar="BOOL", help=f"override {field.name} (true/false)")
        else:
            kind = {"int": int, "float": float}.get(str(field.type), str)
            p.add_argument(flag, type=kind, default=None, help=f"override {field.name}")
    p.set_defaults(run=_run_train)


def _run_train(args) -> int:
    from lagda.config import PRESETS, TrainConfig
    from lagda.train import train

    overrides = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)
                 if getattr(args, f.name) is not None}
    config = PRESETS[args.preset](**overrides)
    run_dir = train(config, args.train, args.test, args.run_dir, resume=args.resume, progress=not args.no_progress)
    print(f"run directory: {run_dir}")
    return 0


def _add_evaluate_parser(subparsers) -> None:
    p = subparsers.add_parser("evaluate", help="retrieval R@1/R@5 of a trained run on a dataset")
    p.add_argument("--model", required=True, help="run directory written by `lagda train`")
    p.add_argument("--data", required=True, help="dataset file (.nc) with the run's modes and frequencies")
    p.add_argument("--split", default="test", help="name of the split in the metric keys (default: test)")
    p.add_argument("--library-size", type=int, default=None, help="use only the first N pairs")
    p.add_argument("--batch-size", type=int, default=512, help="queries per batch")
    p.add_argument("--out", default=None, help="write the metrics as JSON here")
    p.set_defaults(run=_run_evaluate)


def _run_evaluate(args) -> int:
    from lagda.evaluate import evaluate, format_table, write_metrics

    metrics = evaluate(args.model, args.data, split=args.split, library_size=args.library_size,
                       batch_size=args.batch_size)
    print(format_table(metrics))
    if args.out:
        write_metrics(metrics, args.out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Returns the `lagda` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="lagda", description="Lagrangian data assimilation by contrastive learning")
    subparsers = parser.add_subparsers(dest="command", required=True)
    _add_train_parser(subparsers)
    _add_evaluate_parser(subparsers)
    return parser


def main(argv=None) -> int:
    """Runs `lagda`; bad input becomes one line on stderr and exit status 2."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, FileNotFoundError, OSError) as error:
        print(f"lagda {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
