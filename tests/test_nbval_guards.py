"""nbval really guards the numbers: a calculator mutated from ceil to floor makes chapter 0 fail."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MUTATION = ("        iters, last = full + 1, remainder", "        iters, last = full, remainder")  # ceil -> floor


def test_mutated_calculator_fails_nbval_on_chapter_0(tmp_path):
    shutil.copytree(ROOT / "course_utils", tmp_path / "course_utils", ignore=shutil.ignore_patterns("__pycache__"))
    source = tmp_path / "course_utils" / "arithmetic.py"
    text = source.read_text()
    assert MUTATION[0] in text, "the mutation no longer applies: update this test with the calculator"
    source.write_text(text.replace(*MUTATION))
    env = dict(os.environ, PYTHONPATH=str(tmp_path))  # the kernel nbval starts imports the mutant
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env", "-p", "no:randomly", "-q",
         "--nbval-sanitize-with", str(ROOT / "tests" / "nbval_sanitize.cfg"), "-o", "testpaths=",
         str(ROOT / "notebooks" / "00_vocabulary.ipynb")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out[-3000:]
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert len(failed) >= 3, out[-3000:]          # the table, the K=4 comparison, the calculator widget...
    assert "312" in out                            # ...now print floor(10,000 / 32) = 312 instead of 313
