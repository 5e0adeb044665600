"""The loop doctor (chapters 5, 9): watch a training loop you do not change and name its silent bugs.

    from course_utils.doctor import LoopDoctor
    with LoopDoctor(model) as doctor: <your loop>
    print(doctor.report())

A tool a learner takes home: it uses the engine's bug registry (``report.py``) and nothing above it.
``core.py`` holds ``LoopDoctor`` and lists the other parts.
"""
from course_utils.doctor.core import LoopDoctor
from course_utils.doctor.report import Finding, Report

__all__ = ["LoopDoctor", "Finding", "Report"]
