"""`python -m course_utils.train`: the chapter-7 production trainer's command line (``production/cli.py``)."""
from course_utils.production.cli import build_parser, config_from_args, exit_process, main

__all__ = ["build_parser", "config_from_args", "main"]

if __name__ == "__main__":
    exit_process(main())
