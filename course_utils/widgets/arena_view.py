"""Chapter 8: the arena view: pick the knobs, Run (live, stoppable), race the baseline, climb the scoreboard."""
from __future__ import annotations

import html
import threading
import time

import ipywidgets as w

from course_utils.chapters.ch08_arena import BASELINE, MAX_EPOCHS, Challenge, Knobs, Progress, RaceResult, race
from course_utils.engine.models import OPTIMIZERS
from course_utils.engine.schedules import SCHEDULES
from course_utils.chapters.ch08_scoreboard import Scoreboard, reproduces, rerun, same_run, scoreboard_text
from course_utils.widgets.base import View, error_html, line_spaced, number_box, parse_whole_number
from course_utils.widgets.arena_figure import figure_bytes, knobs_words, race_figure, seconds  # noqa: F401
from course_utils.widgets.simulator_layout import OPTIMIZER_LABELS, SCHEDULE_LABELS

DATASET_SIZES = (300, 600, 1200)
TARGETS = (0.8, 0.85, 0.9, 0.95)
LEARNING_RATES = (0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)   # exact values, as the search used
TOP = 8                      # scoreboard rows shown (the top 7 and your latest, if it ranks lower)
ROW_PX = 30                  # one scoreboard row (a Re-run button is 24 px): the table's height never changes
PROGRESS_EVERY_S = 0.1       # progress bar refresh
PLOT_EVERY_S = 0.5           # live race-curve refresh
_COLUMNS = ("#", "updates", "final acc", "optimizer", "lr", "B", "schedule", "epochs", "memory", "time", "")
_BASELINES: dict[str, RaceResult] = {}


def baseline_for(challenge: Challenge) -> RaceResult:
    """The baseline's race on `challenge`, run once per kernel (chapter 8)."""
    if challenge.key not in _BASELINES:
        _BASELINES[challenge.key] = race(challenge, BASELINE)
    return _BASELINES[challenge.key]


def _note(text: str, style: str = "") -> w.HTML:
    """A line across the whole table that takes no width of its own: the columns keep their widths."""
    return w.HTML(f"<div style='width:0;overflow:visible;white-space:nowrap;padding:1px 4px;line-height:24px;"
                  f"color:#666;{style}'>{html.escape(text)}</div>", layout=w.Layout(grid_column="1 / -1"))


def _cell(text: str, style: str = "") -> w.HTML:
    return w.HTML(f"<div style='padding:1px 4px;white-space:nowrap;font-size:12px;line-height:24px;{style}'>"
                  f"{html.escape(text)}</div>")


class ArenaView(View):
    """Controls, Run / Stop with live progress, the race curve, the result and the scoreboard (chapter 8)."""

    def __init__(self, knobs: Knobs = BASELINE, challenge: Challenge = Challenge(), board: Scoreboard | None = None):
        self.board = board or Scoreboard(quiet=True)
        self.board.quiet = True            # what happened to the file is said in the view, not as a RuntimeWarning
        self._warnings_shown = len(self.board.warnings_seen)
        self.rerun_row_of: dict | None = None      # the row the last re-run repeated (marked in the table)
        self.background = True            # Run trains in a thread (the kernel stays free for Stop)
        self.result: RaceResult | None = None
        self.last_row: dict | None = None
        self.rerun_note = ""
        self.error: str | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        style, wide = {"description_width": "initial"}, w.Layout(width="190px")
        self.size = w.Dropdown(options=DATASET_SIZES, value=challenge.n_train, description="dataset size N",
                               style=style, layout=wide)
        self.target = w.Dropdown(options=[(f"{t:.0%}", t) for t in TARGETS], value=challenge.target,
                                 description="target accuracy", style=style, layout=wide)
        self.batch = number_box(knobs.batch_size, "batch size B", width="190px", label_width="initial")
        self.optimizer = w.Dropdown(options=[(OPTIMIZER_LABELS[o], o) for o in OPTIMIZERS], value=knobs.optimizer,
                                    description="optimizer", style=style, layout=w.Layout(width="230px"))
        self._rates = sorted(set(LEARNING_RATES) | {knobs.lr})
        self.lr = w.SelectionSlider(options=[(f"{r:g}", r) for r in self._rates], value=knobs.lr,
                                    description="learning rate", style=style, layout=w.Layout(width="330px"))
        self.schedule = w.Dropdown(options=[(SCHEDULE_LABELS[k], k) for k in SCHEDULES], value=knobs.schedule,
                                   description="schedule", style=style, layout=w.Layout(width="230px"))
        self.epochs = w.IntSlider(value=knobs.epochs, min=1, max=MAX_EPOCHS, description="epochs", style=style,
                                  layout=w.Layout(width="260px"))
        self.run_button = w.Button(description="Run", button_style="primary", icon="play")
        self.stop_button = w.Button(description="Stop", icon="stop", disabled=True)
        self.run_button.on_click(lambda _: self.run())
        self.stop_button.on_click(lambda _: self.stop())
        self.progress = w.IntProgress(value=0, min=0, max=1, layout=w.Layout(width="200px"))
        # one line each, whatever they say: the view's height never changes while it runs
        self.status = w.HTML(layout=w.Layout(height="28px", width="340px", overflow="hidden"))
        self.message = line_spaced(w.HTML(layout=w.Layout(height="58px", overflow="hidden")))   # a ⚠ box, 2 lines
        self.plot = w.Image(format="png", layout=w.Layout(width="660px", height="266px"))
        self.summary = line_spaced(w.HTML(layout=w.Layout(height="46px", overflow="hidden")))   # two lines
        self.table = w.GridBox(layout=w.Layout(grid_template_columns="repeat(11, max-content)", width="100%",
                                               grid_auto_rows=f"{ROW_PX}px", height=f"{(TOP + 2) * ROW_PX}px",
                                               align_content="flex-start", justify_content="flex-start"))
        self.rerun_status = w.HTML(layout=w.Layout(height="24px", overflow="hidden"))
        self.controls = [self.size, self.target, self.batch, self.optimizer, self.lr, self.schedule, self.epochs]
        self.widget = w.VBox([
            w.HTML("<b>The arena</b>: reach the target validation accuracy in the fewest updates. "
                   "Every run trains the course's loop on the spiral (MLP 2x64) and is checked after every update."),
            w.HBox([self.size, self.target]),
            w.HBox([self.batch, self.optimizer, self.schedule]),
            w.HBox([self.lr, self.epochs]),
            w.HBox([self.run_button, self.stop_button, self.progress, self.status]),
            self.message, self.plot, self.summary,
            w.HTML("<b>Scoreboard</b> <small>(your best runs on this challenge, kept between sessions; "
                   "★ = your best; updates = updates to the target; memory = peak bytes saved for backward)</small>"),
            self.table, self.rerun_status,
        ], layout=w.Layout(max_width="900px"))
        self.batch.observe(lambda _: self._check_batch(), "value")
        self.size.observe(lambda _: self._challenge_changed(), "value")
        self.target.observe(lambda _: self._challenge_changed(), "value")
        self._challenge_changed()

    # --- reading the controls ----------------------------------------------------------------------
    def challenge(self) -> Challenge:
        return Challenge(n_train=self.size.value, target=self.target.value)

    def knobs(self) -> Knobs:
        """The knobs on screen; the batch box is read by the course's one number rule (ValueError in words)."""
        return Knobs(batch_size=parse_whole_number(self.batch.value, "batch size B"), optimizer=self.optimizer.value,
                     lr=self.lr.value, schedule=self.schedule.value, epochs=self.epochs.value)

    def set_knobs(self, knobs: Knobs) -> None:
        if knobs.lr not in self._rates:
            self._rates = sorted(set(self._rates) | {knobs.lr})
            self.lr.options = [(f"{r:g}", r) for r in self._rates]
        self.batch.value, self.optimizer.value, self.lr.value = str(knobs.batch_size), knobs.optimizer, knobs.lr
        self.schedule.value, self.epochs.value = knobs.schedule, knobs.epochs

    def _check_batch(self) -> None:
        """Enter in the batch box: a number the arena cannot run is refused at once, in words."""
        try:
            self.knobs().check(self.challenge())
        except ValueError as exc:
            self._show_error(str(exc))
            return
        if self.error and self.error.startswith("batch size B"):
            self.error, self.message.value = None, ""

    # --- actions ------------------------------------------------------------------------------------
    def run(self) -> None:
        """Race the current knobs (in a thread unless `background` is False); bad knobs give a message."""
        if self.running:
            return
        challenge, knobs = self.challenge(), None
        try:
            knobs = self.knobs()
            knobs.check(challenge)
        except ValueError as exc:
            self._show_error(str(exc))
            return
        self._start(lambda: self._race(challenge, knobs))

    def rerun_row(self, index: int, row: dict | None = None) -> None:
        """Re-run scoreboard row `index` (0 = best) with its saved configuration and compare the counts.

        A button passes the row it was drawn for: if the file no longer holds it (damaged and repaired,
        or changed by another kernel), the table is redrawn from the file and the view says so.
        """
        if self.running:
            return
        rows = self.board.rows(self.challenge())
        if row is not None:
            index = next((i for i, r in enumerate(rows) if same_run(r, row)), -1)
        if not 0 <= index < len(rows):
            self._refresh_table()
            self._show_store_warnings()
            if not self.error:
                self._show_error("that row is no longer on your scoreboard file; the table now shows what it holds")
            return
        self._start(lambda: self._rerun(rows[index], index))

    def stop(self) -> None:
        """Ask the running race to stop after its current update."""
        self._stop.set()
        self.status.value = "<i>stopping…</i>"

    def wait(self, timeout: float | None = 120) -> None:
        """Wait for a background run to finish (tests)."""
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # --- work -----------------------------------------------------------------------------------------
    def _start(self, job) -> None:
        self._stop.clear()
        self.error = None
        self.message.value = ""
        self.rerun_status.value = ""
        self._busy(True)
        if self.background:
            self._thread = threading.Thread(target=self._guarded, args=(job,), daemon=True)
            self._thread.start()
        else:
            self._guarded(job)

    def _guarded(self, job) -> None:
        try:
            job()
        except Exception as exc:  # noqa: BLE001 - a callback must never let an exception escape
            self._show_error(f"the run failed: {exc}")
        finally:
            self._busy(False)

    def _race(self, challenge: Challenge, knobs: Knobs) -> None:
        self.status.value = "<i>racing the baseline once for this challenge…</i>"
        baseline = baseline_for(challenge)
        result = race(challenge, knobs, progress=self._progress(challenge, baseline), stop=self._stop.is_set)
        self.result, self.rerun_row_of, self.rerun_note = result, None, ""
        if result.stopped:
            self.summary.value = (f"<b>Stopped</b> after {result.total_updates} updates ({html.escape(_hits(result))}"
                                  f" so far, final val acc {result.final_acc:.1%}). A stopped run is not put on the "
                                  "scoreboard.")
            self.status.value = "stopped"
        else:
            self.last_row = self.board.record(challenge, result)
            self.summary.value = self._result_html(result, self.last_row["rank"])
            self.status.value = "done"
        self.plot.value = figure_bytes(race_figure(result, baseline, challenge.target))
        self._refresh_table()
        self._show_store_warnings()

    def _rerun(self, row: dict, index: int) -> None:
        challenge = self.challenge()
        self.status.value = f"<i>re-running row {index + 1}…</i>"
        baseline = baseline_for(challenge)
        result = rerun(row, progress=self._progress(challenge, baseline), stop=self._stop.is_set)
        self.result, self.rerun_row_of = result, row           # figure, summary and table: this re-run
        self.plot.value = figure_bytes(race_figure(result, baseline, challenge.target))
        if result.stopped:
            said = f"stopped after {result.total_updates} updates"
        elif reproduces(row, result):
            said = (f"reproduced it exactly: {_hits(result)}, final val acc {result.final_acc:.1%}, "
                    f"{result.total_updates} updates")
        else:
            said = (f"differs: saved {row['updates_to_target']}, now {result.updates_to_target} (was the file "
                    "edited, or torch changed?)")
        self.rerun_note = f"re-run of row {index + 1} {said}"
        self.summary.value = (f"<b>Re-run of row {index + 1}</b> ({html.escape(knobs_words(result.knobs))}): "
                              f"{html.escape(said)} · {seconds(result.wall_s)}")
        self.rerun_status.value = html.escape(self.rerun_note)
        self.status.value = "stopped" if result.stopped else "done"
        self._refresh_table()

    def _progress(self, challenge: Challenge, baseline: RaceResult):
        last = {"bar": 0.0, "plot": time.perf_counter(), "wait": PLOT_EVERY_S}
        live: list[tuple[int, float]] = []
        draw = self.background              # a synchronous run (the notebook's first) shows only its result

        def report(p: Progress) -> None:
            live.append((p.updates, p.val_acc))
            now = time.perf_counter()
            if now - last["bar"] >= PROGRESS_EVERY_S or p.updates == p.planned_updates:
                last["bar"] = now
                self.progress.max, self.progress.value = p.planned_updates, p.updates
                hit = f"; target reached at {p.updates_to_target}" if p.updates_to_target else ""
                self.status.value = (f"epoch {p.epoch}, update {p.updates}/{p.planned_updates}: "
                                     f"val acc {p.val_acc:.1%}{hit}")
            if draw and now - last["plot"] >= last["wait"]:       # the curve drawn decimated: a bounded cost
                self.plot.value = figure_bytes(race_figure(None, baseline, challenge.target, live))
                last["plot"] = time.perf_counter()          # drawing takes time too: never more than 1/4 of it
                last["wait"] = max(PLOT_EVERY_S, 3 * (last["plot"] - now))
        return report

    # --- showing ----------------------------------------------------------------------------------------
    def _busy(self, busy: bool) -> None:
        for control in self.controls + [self.run_button] + self._rerun_buttons():
            control.disabled = busy
        self.stop_button.disabled = not busy
        if busy:
            self.progress.value = 0

    def _rerun_buttons(self) -> list[w.Button]:
        return [c for c in self.table.children if isinstance(c, w.Button)]

    def _show_error(self, message: str) -> None:
        self.error = message
        self.message.value = error_html(message)

    def _show_store_warnings(self) -> None:
        """A damaged or unwritable scoreboard file: one line in the view (the newest), once."""
        seen = self.board.warnings_seen
        if len(seen) > self._warnings_shown:
            self._warnings_shown = len(seen)
            self.error = seen[-1][0].upper() + seen[-1][1:]
            self.message.value = error_html(self.error)

    def _result_html(self, r: RaceResult, rank: int | None) -> str:
        runs = len(self.board.rows(self.challenge()))
        place = (f"#{rank} of {runs} on your scoreboard" if rank else f"not in your top runs ({runs} kept)")
        return (f"<b>{html.escape(_hits(r))}</b> · final val acc {r.final_acc:.1%} · peak memory "
                f"{r.peak_memory:,} B (saved for backward, CPU) · {r.total_updates} updates · {seconds(r.wall_s)} · "
                f"<b>{place}</b>")

    def _challenge_changed(self) -> None:
        challenge = self.challenge()
        self.result, self.rerun_row_of, self.rerun_note = None, None, ""
        self.rerun_status.value = ""
        self.summary.value = f"<i>Challenge: {html.escape(challenge.key)}. Pick your knobs and press Run.</i>"
        base = _BASELINES.get(challenge.key)
        self.plot.value = figure_bytes(race_figure(None, base, challenge.target))
        self._refresh_table()

    def _shown_rows(self, rows: list[dict]) -> list[tuple[int, dict]]:
        """(rank, row) pairs the table shows: the top TOP, or the top TOP-1 and your latest run below them."""
        shown = list(enumerate(rows[:TOP], 1))
        if self.last_row is not None and not any(same_run(r, self.last_row) for _, r in shown):
            latest = next(((i, r) for i, r in enumerate(rows, 1) if same_run(r, self.last_row)), None)
            if latest is not None:
                shown = shown[:TOP - 1] + [latest]
        return shown

    def _refresh_table(self) -> None:
        rows = self.board.rows(self.challenge())
        self._show_store_warnings()
        # the Re-run column's header is blank but a line high, so its rule lines up with the others'
        cells: list[w.Widget] = [_cell(c or "\u00a0", "font-weight:bold;border-bottom:1px solid #999" + (
            ";min-width:134px" if not c else "")) for c in _COLUMNS]     # the Re-run column keeps its width
        for rank, row in self._shown_rows(rows):
            k = row["knobs"]
            latest = self.last_row is not None and same_run(row, self.last_row)
            rerun_of = self.rerun_row_of is not None and same_run(row, self.rerun_row_of)
            style = "background:#fff3c4;font-weight:bold;" if rank == 1 else ""
            style += "color:#1565c0;" if latest or rerun_of else ""
            hit = str(row["updates_to_target"]) if row["updates_to_target"] is not None else "not reached"
            mark = ("★ " if rank == 1 else "") + str(rank)
            tag = " ← re-run" if rerun_of else " ← latest" if latest else ""
            values = (mark, hit, f"{row['final_acc']:.1%}", OPTIMIZER_LABELS.get(k["optimizer"], k["optimizer"]),
                      f"{k['lr']:g}", str(k["batch_size"]), SCHEDULE_LABELS.get(k["schedule"], k["schedule"]),
                      str(k["epochs"]), f"{row['peak_memory']:,} B", seconds(row["wall_s"]) + tag)
            cells += [_cell(v, style) for v in values]
            button = w.Button(description="Re-run this row", layout=w.Layout(width="134px", height="24px"),
                              tooltip=f"train row {rank}'s configuration again and compare its count",
                              disabled=self.running)
            button.on_click(lambda _, index=rank - 1, saved=row: self.rerun_row(index, saved))
            cells.append(button)
        if not rows:
            cells.append(_note("no runs yet on this challenge: press Run", "font-style:italic"))
        elif len(rows) > TOP or any(rank > TOP for rank, _ in self._shown_rows(rows)):
            shown = "the top 7 and your latest" if self._shown_rows(rows)[-1][0] > TOP else f"the top {TOP}"
            cells.append(_note(f"{shown} of {len(rows)} runs on this challenge", "font-size:12px"))
        self.table.children = cells

    def text(self) -> str:
        challenge = self.challenge()
        lines = [f"Arena: {challenge.key}"]
        base = _BASELINES.get(challenge.key)
        if base is not None:
            lines.append("baseline  " + base.summary())
        if self.error:
            lines.append("message: " + self.error)
        if self.result is not None:
            lines.append("your run  " + self.result.summary())
        lines.append(scoreboard_text(self.board.rows(challenge), top=TOP, mark=self.last_row))
        if self.rerun_note:
            lines.append(self.rerun_note)
        return "\n".join(lines)


def _hits(r: RaceResult) -> str:
    return (f"{r.target:.0%} after {r.updates_to_target} updates" if r.reached
            else f"{r.target:.0%} not reached in {r.total_updates} updates")


def arena(knobs: Knobs | None = None, challenge: Challenge | None = None, board: Scoreboard | None = None,
          run: bool = True, background: bool = True, **knob_values) -> ArenaView:
    """Show the arena with `knobs` (or knob keyword values) set, raced once so the page opens on a result.

    background=False makes every later Run train in the caller's thread (headless tests) (chapter 8).
    """
    knobs = knobs or Knobs(**{**BASELINE.__dict__, **knob_values})
    view = ArenaView(knobs, challenge or Challenge(), board)
    view.background = False
    if run:
        said = view.error                       # what the scoreboard file needed (repaired?) stays in view
        view.run()
        if said and not view.error:
            view.error, view.message.value = said, error_html(said)
    view.background = background
    return view
