"""The loop doctor (chapters 5, 9): ``from course_utils.doctor import LoopDoctor``."""
from course_utils.doctor.core import LoopDoctor
from course_utils.doctor.report import Finding, Report

__all__ = ["LoopDoctor", "Finding", "Report"]
