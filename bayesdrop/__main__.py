"""Command line: ``python -m bayesdrop demo``."""

from __future__ import annotations

import argparse
import sys


def main(argv=None):
    """Entry point of the ``bayesdrop`` command."""
    parser = argparse.ArgumentParser(prog="bayesdrop", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="fit at q > 0, sample the posterior, print the ArviZ "
                                       "summary and the mode check, save a figure")
    demo.add_argument("--out", default="bayesdrop_demo.png",
                      help="figure path (default: bayesdrop_demo.png)")
    demo.add_argument("--noise-level", type=float, default=0.2,
                      help="dropout rate q of the model (default: 0.2)")
    demo.add_argument("--progress", action="store_true", help="show progress bars")
    table = sub.add_parser("table", help="fit the three estimators at several noise levels "
                                         "and print a table")
    table.add_argument("--noise-levels", type=float, nargs="+", default=[0.0, 0.2, 0.5],
                       help="dropout rates q to fit (default: 0 0.2 0.5)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import run_main

        run_main(args.out, noise_level=args.noise_level, progressbar=args.progress)
    else:
        from .demo import run_demo

        run_demo(tuple(args.noise_levels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
