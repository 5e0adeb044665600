"""Chapter 1's copy-on-read cell: a forked worker reading Python objects copies them; reading an array does not."""
import sys

import pytest

from course_utils.chapters.ch01_workers import copy_on_read

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="USS and fork as on Linux")


def test_reading_a_list_copies_it_and_reading_an_array_does_not():
    grown = copy_on_read(500_000)
    objects = sys.getsizeof(1.0) * 500_000 / 2**20
    assert grown["list"] > objects / 2
    assert grown["array"] < 2


def test_the_growth_follows_what_was_read():
    """Twice the floats, about twice the copy: the figure measures the reads, not the worker's start-up."""
    small, big = copy_on_read(250_000)["list"], copy_on_read(500_000)["list"]
    assert 1.5 < big / small < 2.6
