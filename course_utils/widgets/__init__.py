"""The simulation views: one module per simulation, each a thin layer over a course_utils engine."""
