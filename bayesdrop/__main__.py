"""Command line: ``python -m bayesdrop demo``, ``python -m bayesdrop compile``."""

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
    comp = sub.add_parser("compile", help="compile the kernels of chosen estimators and input "
                                          "kinds into numba's on-disk cache (a fit and a small "
                                          "posterior sample each), printing each step's time")
    from .warmup import ESTIMATORS

    comp.add_argument("--estimators", nargs="+", default=None, choices=ESTIMATORS,
                      help="estimator class names (default: all three linear ones)")
    comp.add_argument("--kinds", nargs="+", default=None, choices=("dense", "sparse"),
                      help="input kinds (default: dense sparse)")
    comp.add_argument("--no-sample", action="store_true",
                      help="compile the fits only, not the Gibbs sweeps")
    args = parser.parse_args(argv)
    if args.command == "compile":
        import time

        from .warmup import ESTIMATORS, KINDS, warm

        t0 = time.perf_counter()
        warm(args.estimators or ESTIMATORS, args.kinds or KINDS, sample=not args.no_sample)
        print(f"compiled in {time.perf_counter() - t0:.1f} s (later processes load the "
              "kernels from numba's cache)")
    elif args.command == "demo":
        from .demo import run_main

        run_main(args.out, noise_level=args.noise_level, progressbar=args.progress)
    else:
        from .demo import run_demo

        run_demo(tuple(args.noise_levels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
