"""`python -m course_utils.production`: the same command line as `python -m course_utils.train`."""
from course_utils.production.cli import exit_process, main

exit_process(main())
