"""Test-wide setup: quiz progress goes to a throwaway file (kernels started by nbval inherit it)."""
import os
import tempfile

_PROGRESS_DIR = tempfile.mkdtemp(prefix="course-progress-")
os.environ["COURSE_PROGRESS"] = os.path.join(_PROGRESS_DIR, "progress.json")
os.environ.setdefault("MPLBACKEND", "Agg")
