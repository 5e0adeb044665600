"""`python -m course_utils.production`: the same command line as `python -m course_utils.train`."""
import sys

from course_utils.production.cli import main

sys.exit(main())
