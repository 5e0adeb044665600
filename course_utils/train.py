"""`python -m course_utils.train`: the chapter-7 production trainer's command line (``production/cli.py``)."""
import sys

from course_utils.production.cli import build_parser, config_from_args, main

__all__ = ["build_parser", "config_from_args", "main"]

if __name__ == "__main__":
    sys.exit(main())
