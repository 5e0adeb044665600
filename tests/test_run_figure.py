"""Chapter 6's frozen simulator figure is legible in the notebook: 848 px wide at most, no text under 9 px."""
import io

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from course_utils.infra.notebook import one_thread  # noqa: E402
from course_utils.engine.session import Session, TrainConfig  # noqa: E402
from course_utils.chapters.ch06_simulator import run_figure  # noqa: E402

NOTEBOOK_DPI, OUTPUT_PX, MIN_PX = 90, 848, 9     # setup_notebook's dpi; JupyterLab's output width at 900 px


@pytest.mark.parametrize("bugs", [(), ("missing_zero_grad",)])
def test_text_is_at_least_9_px_on_screen(bugs):
    session = Session(TrainConfig(epochs=2, n_train=128, bugs=bugs), ghost=True)
    with one_thread():
        session.run_to_end()
    with plt.rc_context({"figure.dpi": NOTEBOOK_DPI}):
        fig = run_figure(session)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")       # what the inline backend sends (setup_notebook: no tight bbox)
        width = int.from_bytes(buffer.getvalue()[16:20], "big")
        shown = min(1.0, OUTPUT_PX / width)                           # a wider image is scaled down to fit
        sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_text().strip()]
        plt.close(fig)
    assert width <= OUTPUT_PX + 20
    assert min(sizes) * NOTEBOOK_DPI / 72 * shown >= MIN_PX, min(sizes)
