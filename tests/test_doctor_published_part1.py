"""Part 1 of the published-loop corpus's per-case tests (see tests/doctor_published/suite.py): every bug named,
nothing on correct loops, weights bitwise unchanged, for every fourth loop from LOOPS[1]."""
from tests.doctor_published.suite import part_tests

globals().update(part_tests(1))
