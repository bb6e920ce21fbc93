"""Command line: ``python -m bayesdrop demo``."""

from __future__ import annotations

import argparse
import sys


def main(argv=None):
    """Entry point of the ``bayesdrop`` command."""
    parser = argparse.ArgumentParser(prog="bayesdrop", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="fit the estimators on bundled data and print a table")
    demo.add_argument("--noise-levels", type=float, nargs="+", default=[0.0, 0.2, 0.5],
                      help="dropout rates q to fit (default: 0 0.2 0.5)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo

        run_demo(tuple(args.noise_levels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
