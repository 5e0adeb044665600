"""The published-loop corpus's verdict in `make test`: its tests ran in the background of the browser phase
(tools/background_corpus.py, started by conftest.py once collection was final) and all of them passed. In a session
that runs the corpus's own tests (a plain `pytest`), this test is left out."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import background_corpus  # noqa: E402

pytestmark = pytest.mark.timeout(background_corpus.TIMEOUT_S + 60)


def test_the_published_loop_corpus_passes(request):
    import conftest
    run = request.config.stash[conftest.CORPUS_RUN]
    run.close()
    print(f"[doctor corpus] {run.count} tests, exit code {run.code} ({run.seconds:.0f} s in the background)")
    assert run.code == 0 and run.count > 0, run.text()[-8000:]
