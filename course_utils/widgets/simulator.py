"""Chapter 6: the training simulator: a real run of the course's loop to configure, step, break and watch.

The view drives a ``Session`` (``course_utils/engine/session.py``): Step pulls one micro-batch, Train epoch and
Train to end pull more (in a kernel as a task that yields between micro-batches, so Stop and the
learning-rate slider still work while it runs). The live panels are a ``LivePlot`` fed only with new
points. With a bug ticked, a healthy twin with the same seed runs in lockstep and is drawn faintly.
"""
from __future__ import annotations

import asyncio
import html
import math
import time
import warnings
from dataclasses import replace

import ipywidgets as w
import torch

from course_utils.engine.bugs import BUGS, LOOP_BUGS
from course_utils.engine.loop import EpochEvent, StepEvent
from course_utils.engine.session import Session, TrainConfig
from course_utils.chapters.ch06_simulator import boundary_grid, data_extent
from course_utils.widgets.base import View, error_html, line_spaced, parse_decimal, parse_whole_number
from course_utils.widgets.live_plot import LivePlot
from course_utils.widgets.simulator_layout import (BOX_ORDER, DEFAULT, FLUSH_S, GRID, LIMITS, LOG_LR, MESSAGE_HEIGHT,
                                                    NEEDS, WHOLE, axis_end, event_points, panels, setting_box)
from course_utils.widgets.simulator_readouts import fmt, readout_lines, settings_text


def _last_epoch(session: Session) -> EpochEvent | None:
    """The latest EpochEvent, found from the end (O(1) in a long history)."""
    return next((e for e in reversed(session.history) if isinstance(e, EpochEvent)), None)


class SimulatorView(View):
    """Settings, bug toggles, Step / Train epoch / Train to end / Stop / Reset, readouts and live panels."""

    def __init__(self, config: TrainConfig = DEFAULT):
        self.session = Session(config, ghost=True)
        self.good = config                       # the last valid settings (what the run uses)
        self.error: str | None = None
        self.note = "Press Step to train on one micro-batch, or Train epoch."
        self.running = False
        self._reverting = False
        self._task: asyncio.Task | None = None
        self._seen = self._ghost_seen = 0
        self.boxes = {name: setting_box(name, config) for name in BOX_ORDER}
        style, layout = {"description_width": "140px"}, w.Layout(width="270px")
        for box in self.boxes.values():
            box.style, box.layout = style, layout
            box.observe(self._on_setting, names="value")
        self.log_lr = w.FloatSlider(value=round(math.log10(config.lr), 2), min=LOG_LR[0], max=LOG_LR[1], step=0.05,
                                    description="log₁₀ learning rate", readout_format=".2f", continuous_update=False,
                                    style=style, layout=w.Layout(width="420px"))
        self.log_lr.observe(self._on_lr, names="value")
        self.lr_label = w.HTML(layout=w.Layout(width="140px"))
        self.bug_boxes = {name: w.Checkbox(name in config.bugs, description=BUGS[name].title, indent=False,
                                           layout=w.Layout(width="400px")) for name in LOOP_BUGS}
        for box in self.bug_boxes.values():
            box.observe(self._on_setting, names="value")
        self.buttons = {
            "step": w.Button(description="Step", icon="step-forward", tooltip="train on one micro-batch"),
            "epoch": w.Button(description="Train epoch", icon="forward", button_style="primary"),
            "end": w.Button(description="Train to end", icon="fast-forward"),
            "stop": w.Button(description="Stop", icon="stop", disabled=True),
            "reset": w.Button(description="Reset", icon="undo"),
        }
        self.buttons["step"].on_click(lambda _: self._safely(self.step))
        self.buttons["epoch"].on_click(lambda _: self._safely(self._start, "epoch"))
        self.buttons["end"].on_click(lambda _: self._safely(self._start, "end"))
        self.buttons["stop"].on_click(lambda _: self._safely(self.stop))
        self.buttons["reset"].on_click(lambda _: self._safely(self.reset))
        # room for the longest note or error (three lines at 848 px): the panels below never move
        self.message = line_spaced(w.HTML(layout=w.Layout(height=MESSAGE_HEIGHT, width="100%", overflow="hidden")))
        # the readouts are the plot's text: a Step's new points and numbers reach the page in one message
        self.plot = LivePlot(boundary=True, text_lines=5, layout=w.Layout(min_height="530px"))
        self.widget = w.VBox([
            w.HTML("<b>Training simulator</b>: the course's real loop on a spiral. Step through it, train, "
                   "change the learning rate while it runs, tick a bug and compare with the faint healthy ghost."),
            w.HBox([w.VBox(list(self.boxes.values())[:5]), w.VBox(list(self.boxes.values())[5:])]),
            w.HBox([self.log_lr, self.lr_label]),
            w.HTML("<b>Bugs</b> (each changes one operation of the loop; a healthy ghost runs beside it):"),
            w.GridBox(list(self.bug_boxes.values()), layout=w.Layout(grid_template_columns="repeat(2, 405px)")),
            w.HBox(list(self.buttons.values())),
            self.message, self.plot,
        ], layout=w.Layout(width="100%", max_width="860px"))
        self._restart()

    # --- settings --------------------------------------------------------------------------------

    def _controls_config(self) -> TrainConfig:
        """The settings on screen as a TrainConfig; ValueError in the learner's words if one is out of range."""
        values = {name: box.value for name, box in self.boxes.items()}
        for name, (label, low, high) in LIMITS.items():
            parse = parse_whole_number if name in WHOLE else parse_decimal
            values[name] = parse(values[name], label, low, high)
        bugs = tuple(name for name, box in self.bug_boxes.items() if box.value)
        chosen = [BUGS[name] for name in bugs]
        for i, first in enumerate(chosen):
            for second in chosen[i + 1:]:
                if first.operation == second.operation:
                    raise ValueError(f"“{first.title}” and “{second.title}” both change the same operation "
                                     f"({first.operation}): tick only one of them")
        values["clip_norm"] = values["clip_norm"] or None           # 0 switches clipping off
        try:
            return replace(self.good, **values, lr=10 ** self.log_lr.value, bugs=bugs)
        except ValueError as exc:
            message = str(exc)
            for name, (label, _, _) in LIMITS.items():
                message = message.replace(name, label)
            raise ValueError(message.replace("accum_steps", "accumulation steps")) from None

    def _on_setting(self, change) -> None:
        if self._reverting:
            return
        self._safely(self._apply_setting, change)

    def _apply_setting(self, change) -> None:
        if self.running:
            self._stop_now()
        try:
            config = self._controls_config()
        except ValueError as exc:
            self._revert(change)
            self._show_error(f"{exc}. The run and its settings are kept as they were.")
            return
        owner = change["owner"]
        label = getattr(owner, "description", "a setting")
        name = next((n for n, box in self.boxes.items() if box is owner), None)
        value = getattr(config, name) if name in LIMITS else None
        said = f" to {fmt(value) if isinstance(value, float) else f'{value:,}'}" if value is not None else ""
        if name == "clip_norm" and value is None:
            said = " to 0 (off)"
        if config == self.good and name in LIMITS:      # "1e1" where 10 stood: the same run, nothing to restart
            self.error = None
            self.note = f"“{label}” is already{said[3:]}: nothing changed; the run goes on from here."
            self._refresh()
            return
        self.good = config
        self.session.reset(config)
        self.error = None
        self.note = f"You changed “{label}”{said}: a new run started from step 0 (same seed)."
        hidden = [(BUGS[b].title, NEEDS[b][1]) for b in config.bugs if b in NEEDS and not NEEDS[b][0](config)]
        if hidden:
            self.note += " With these settings " + "; ".join(
                f"“{title}” changes nothing: it needs {need}" for title, need in hidden) + "."
        self._restart()

    def _revert(self, change) -> None:
        self._reverting = True
        try:
            change["owner"].value = change["old"]
        finally:
            self._reverting = False

    def _on_lr(self, change) -> None:
        if not self._reverting:
            self._safely(self.set_lr, 10 ** change["new"])

    def set_lr(self, lr: float) -> None:
        """Change the learning rate: mid-run the run goes on (the schedule keeps its shape); before step 1 it restarts."""
        if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
            self._show_error(f"learning rate must be a number above 0; got {lr}")
            return
        self.error = None
        if not self.session.history:
            self.good = replace(self.good, lr=lr)
            self.session.reset(self.good)
            self.note = f"Learning rate set to {fmt(lr)} before the first step."
            self._restart()
            return
        self.session.set_lr(lr)
        self.good = replace(self.good, lr=lr)        # a later Reset starts from the slider's value
        self.note = (f"Learning rate changed to {fmt(lr)} at step {self.session.state.step}: the run goes on "
                     "from here; the schedule keeps its shape.")
        self._refresh()

    # --- actions ---------------------------------------------------------------------------------

    def step(self) -> StepEvent | None:
        """Train on one micro-batch (and evaluate, if it ended the epoch)."""
        if self.session.done:
            self.note = "The run is complete: press Reset or change a setting."
            self._refresh()
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            event = self.session.step()
        self.error = None
        self.note = "One micro-batch: zero_grad, forward, loss, backward, clip, step, schedule (as the bugs allow)."
        self._record()
        self._refresh(boundary=True)
        return event

    def train_epoch(self) -> EpochEvent | None:
        """Train to the end of the current epoch (synchronously: notebooks and tests)."""
        return self._train_sync("epoch")

    def train_to_end(self) -> EpochEvent | None:
        """Train every remaining epoch (synchronously)."""
        return self._train_sync("end")

    def skip(self, steps: int) -> int:
        """Train `steps` micro-batches at once, drawing only the end: a long run's history in seconds (chapter 6).

        What a live run would have drawn, minus the frames in between; returns the micro-batches trained.
        """
        done = 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            while done < steps and self.session.step() is not None:
                done += 1
        self._record()
        self.error = None
        self.note = f"Skipped ahead {done:,} micro-batches: step {self.session.state.step:,} of the run."
        self._refresh(boundary=True)
        return done

    def _train_sync(self, mode: str) -> EpochEvent | None:
        start = self.session.epochs_done
        self.session.clear_stop()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            while not self.session.done:
                for _ in self.session.epoch_steps():
                    pass
                if mode == "epoch":
                    break
        self._record()
        self.error = None
        self._finish_note(stopped=False, start=start)
        self._refresh(boundary=True)
        return _last_epoch(self.session) if self.session.epochs_done > start else None

    def _start(self, mode: str) -> None:
        """A button press: in a kernel, train as a task that yields between micro-batches; else synchronously."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            self._train_sync(mode)
        elif not self.running and not self.session.done:
            self.session.clear_stop()
            self._set_running(True)
            self._task = loop.create_task(self._train_async(mode))

    async def _train_async(self, mode: str) -> None:
        start, stopped, last = self.session.epochs_done, False, time.monotonic()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                while not self.session.done and not stopped:
                    epoch = self.session.epochs_done
                    for _ in self.session.epoch_steps():
                        if time.monotonic() - last > FLUSH_S:
                            self._record()
                            self._refresh(boundary=True)
                            last = time.monotonic()
                        await asyncio.sleep(0)
                    stopped = self.session.epochs_done == epoch and not self.session.done
                    if mode == "epoch":
                        break
            self._record()
            self.error = None
            self._finish_note(stopped, start)
        except Exception as exc:  # no exception may escape: show it in the view
            self._show_error(f"Training stopped with an error: {exc}")
        finally:
            self._set_running(False)
            self._refresh(boundary=True)

    def _finish_note(self, stopped: bool, start: int) -> None:
        epochs = self.session.epochs_done - start
        if stopped:
            self.note = f"Stopped at step {self.session.state.step}; Step or Train epoch goes on from here."
        elif self.session.done:
            self.note = f"The run is complete ({self.session.epochs_done} epochs): press Reset or change a setting."
        else:
            self.note = f"Trained {epochs} epoch{'s' if epochs != 1 else ''}."

    def stop(self) -> None:
        """Stop a running Train epoch / Train to end after its current micro-batch."""
        if self.running:
            self.session.request_stop()
        elif not self.session.done:      # a Stop that arrives after the run ended keeps the run's last word
            self.note = "Nothing is running."
            self._refresh()

    def _stop_now(self) -> None:
        self.session.request_stop()
        if self._task is not None:
            self._task.cancel()
        self._set_running(False)

    def reset(self) -> None:
        """Start the run again from step 0 with the settings on screen."""
        if self.running:
            self._stop_now()
        self.session.reset(self.good)
        self.error = None
        self.note = "Reset: a new run from step 0 (same seed, same settings)."
        self._restart()

    def _set_running(self, running: bool) -> None:
        self.running = running
        wanted = [(button, (not running) if name == "stop" else (running or (
                  self.session.done and name in ("step", "epoch", "end")))) for name, button in self.buttons.items()]
        wanted += [(box, running) for box in [*self.boxes.values(), *self.bug_boxes.values()]]
        for widget, disabled in wanted:
            if widget.disabled != disabled:          # setting an equal value still costs traitlets' validation
                widget.disabled = disabled

    def _safely(self, action, *args) -> None:
        try:
            action(*args)
        except Exception as exc:  # a callback must never leave a traceback the learner cannot see
            self._show_error(f"Something went wrong: {exc}. The last run is kept; press Reset to start again.")

    def _show_error(self, text: str) -> None:
        self.error = text
        self._refresh()

    # --- what the view shows ---------------------------------------------------------------------

    def _restart(self) -> None:
        """A new run: clear the panels, send the data points, draw the untrained boundary."""
        self._seen = self._ghost_seen = 0
        self.plot.set_panels(panels(self.session.ghost is not None))
        self.plot.clear()
        train = self.session.state.splits.train.tensors
        self.extent = data_extent(train[0])
        self.plot.extent = list(self.extent)
        self.planned = max(1, self.session.config.epochs * self.session.config.arithmetic().iters_per_epoch)
        self.plot.xmax = axis_end(0, self.planned)
        self.plot.set_points(train[0].float().numpy().tobytes(), train[1].to(torch.uint8).numpy().tobytes())
        self._set_running(False)
        self._refresh(boundary=True)

    def _record(self) -> None:
        """Queue every event since the last call (and the ghost's) as new points of the live panels."""
        history = self.session.history
        for event in history[self._seen:]:
            self._add(event, "")
        self._seen = len(history)
        if self.session.ghost is not None:
            ghost = self.session.ghost.history
            for event in ghost[self._ghost_seen:]:
                self._add(event, "ghost_")
            self._ghost_seen = len(ghost)

    def _add(self, event, prefix: str) -> None:
        for series, x, y in event_points(event, prefix):
            self.plot.add(series, x, y)

    def _refresh(self, boundary: bool = False) -> None:
        if boundary:
            self.plot.set_grid(GRID, *boundary_grid(self.session.model, self.extent, GRID))
        self.lr_label.value = f"lr = {fmt(self.session.lr)}"
        self.message.value = error_html(self.error) if self.error else f"<i>{html.escape(self.note)}</i>"
        self.plot.set_text(self._readout_lines())
        self.plot.xmax = axis_end(self.session.state.step, self.planned)
        self.plot.flush()
        if not self.running:
            self._set_running(False)

    def _readout_lines(self) -> list[str]:
        return readout_lines(self.session)

    def settings_text(self) -> str:
        return settings_text(self.session.config)

    def text(self) -> str:
        c = self.session.config
        lines = ["Training simulator (the course's loop on a spiral, seed %d)" % c.seed,
                 "settings: " + self.settings_text(),
                 "bugs: " + (", ".join(c.bugs) or "none")]
        if self.session.lr_changes:
            lines.append("learning rate changed mid-run: " + ", ".join(
                f"{fmt(lr)} at step {step}" for step, lr in self.session.lr_changes))
        lines += self._readout_lines()
        lines.append("message: " + (self.error or self.note))
        return "\n".join(lines)


def simulator(config: TrainConfig | None = None, **settings) -> SimulatorView:
    """Show the training simulator (chapter 6), with the default run or `settings` changed."""
    return SimulatorView(replace(config or DEFAULT, **settings))
