"""Chapter 1's copy-on-read cell: a forked worker reading Python objects copies them; reading an array does not.

Measured in a fresh interpreter, as the chapter's kernel is: a worker forked from a long-lived process with a
fragmented heap (a test worker that ran hundreds of tests) dirties inherited allocator pages with its own temporary
objects (3.6 MiB while reading the array, in two fresh-clone CI runs), which is not what the chapter measures."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="private dirty memory and fork as on Linux")
ROOT = Path(__file__).resolve().parents[1]


def _fresh(*sizes: int) -> list[dict[str, float]]:
    code = ("import json, sys\nfrom course_utils.chapters.ch01_workers import copy_on_read\n"
            f"print(json.dumps([copy_on_read(n) for n in {list(sizes)}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_reading_a_list_copies_it_and_reading_an_array_does_not_and_the_growth_follows_what_was_read():
    """Twice the floats, about twice the copy: the figure measures the reads, not the worker's start-up."""
    small, grown = _fresh(250_000, 500_000)
    objects = sys.getsizeof(1.0) * 500_000 / 2**20
    assert grown["list"] > objects / 2
    assert grown["array"] < 2
    assert 1.5 < grown["list"] / small["list"] < 2.6
