"""Chapters 3 and 4: the main controls of the step-through and train-vs-eval views, timed (see timing.py).

Their INTERACTIONS stay in tests/browser/interactions.py; this module adds only TIMINGS.
"""
from tests.browser.timing import click_button

INTERACTIONS: dict = {}

TIMINGS = {
    "03_anatomy_of_a_step.ipynb": [
        ("step-through: reset", click_button("reset"), "step-reset"),
        ("step-through: zero_grad()", click_button("zero_grad()"), None),
        ("step-through: forward", click_button("forward"), None),
        ("step-through: loss", click_button("loss"), None),
        ("step-through: backward()", click_button("backward()"), None),
        ("step-through: backward() again (an error, shown in the log)", click_button("backward()"),
         "step-backward-twice"),
        ("step-through: optimizer.step() (y and L become stale)", click_button("optimizer.step()"), "step-stale"),
    ],
    "04_evaluation_loop.ipynb": [
        # the notebook leaves the view in eval mode after two train and two eval passes
        ("train vs eval: reset", click_button("reset"), None),
        ("train vs eval: forward (eval)", click_button("forward"), None),
        ("train vs eval: mode train (shown at once)", click_button("train"), "te-mode-train"),
        ("train vs eval: forward (train)", click_button("forward"), "te-train"),
        ("train vs eval: mode eval", click_button("eval"), None),
        ("train vs eval: forward (eval)", click_button("forward"), None),
        ("train vs eval: mode train", click_button("train"), None),
    ] + [(f"train vs eval: forward {i} (numbering past 8)", click_button("forward"), "te-many" if i == 9 else None)
         for i in range(3, 10)],
}
