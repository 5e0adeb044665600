"""Chapter 5: train a comparison (and draw its figure) ahead, while the learner is still choosing or reading.

In a kernel, ``RunAhead.start`` trains what ``ch05_museum.compare`` will need one micro-batch per turn of the
kernel's event loop (so every click is still answered at once), then draws the figure. When the learner
asks for that result, ``finish`` completes whatever is left synchronously and hands over the figure. The
runs are the very runs ``compare`` trains (same config, same seed, same cache); headless, with no running
event loop, nothing is done ahead.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterator


class RunAhead:
    """One piece of work done ahead at a time, identified by a key (the bugs it is for)."""

    def __init__(self) -> None:
        self.key: Hashable | None = None
        self.png: bytes | None = None
        self._steps: Iterator[None] | None = None
        self._task: asyncio.Task | None = None

    def start(self, key: Hashable, steps: Iterator[None], draw: Callable[[], bytes]) -> None:
        """Begin `steps` (then `draw`) for `key` in the running event loop, dropping earlier work ahead."""
        self.cancel()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self.key, self._steps = key, steps

        async def work() -> None:
            for _ in steps:
                await asyncio.sleep(0)
            self._steps = None
            self.png = draw()

        self._task = loop.create_task(work())

    def finish(self, key: Hashable) -> bytes | None:
        """Complete the work for `key` now (its runs are then cached); its figure if it was drawn already.

        None when there is no figure yet, or when finishing failed: the caller then computes the result itself.
        """
        png = None
        if self.key == key:
            if self._task is not None:
                self._task.cancel()          # paused between micro-batches: finishing here is safe
            try:
                for _ in self._steps or ():
                    pass
                png = self.png
            except Exception:                # only a head start: the caller trains afresh, and shows any error then
                png = None
        self.cancel()
        return png

    def cancel(self) -> None:
        """Drop the work ahead (what it trained so far is simply not used)."""
        if self._task is not None:
            self._task.cancel()
        self.key, self.png, self._steps, self._task = None, None, None, None
