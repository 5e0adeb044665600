"""The time limit of a check (every chapter's exercises): a learner's endless loop must not hang the notebook.

How it is enforced, and what each way costs:

- **Chosen: a watchdog thread that raises in the checked thread.** The check runs where the learner's
  code lives (their model, their globals, the course's hooks all need the same process). A watchdog
  thread waits on an event; at the deadline it asks CPython to raise ``TimeUp`` in the checked thread
  (``PyThreadState_SetAsyncExc``), which the interpreter delivers at its next bytecode boundary: a pure
  Python loop, or a loop calling torch, stops within milliseconds. Cost: one thread per check (about
  0.2 ms), nothing per line of the learner's code. Limit: one long call into C (``time.sleep(60)``,
  a huge matrix product) is only interrupted when it returns; for the main thread, a second signal
  (SIGINT, what JupyterLab's Interrupt button sends) then breaks a sleep, one second later.
- A trace function (``sys.settrace``) stopping at a deadline also catches pure Python loops, but slows
  every line of Python run under it several times over and displaces debuggers and coverage tools.
- A subprocess can be killed whatever it does, but it cannot see the learner's objects, pickling a
  notebook-defined function fails under spawn, and starting one costs a second or more of imports.
- ``signal.alarm`` needs the main thread, is POSIX-only, and would displace pytest-timeout's alarm.
"""
from __future__ import annotations

import contextlib
import ctypes
import signal
import threading
from collections.abc import Iterator

MIN_S = 0.01    # the shortest limit (the watchdog thread takes ~0.1 ms to start)
GRACE_S = 1.0   # after the deadline, how long the watchdog waits before it also sends SIGINT (main thread only)


class TimeUp(BaseException):
    """Raised inside the checked code at its deadline (a BaseException: `except Exception` cannot swallow it)."""


def _raise_in(thread_id: int, exception: type[BaseException] | None) -> None:
    """Ask CPython to raise `exception` in thread `thread_id` (None clears a pending one)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                               ctypes.py_object(exception) if exception else ctypes.c_void_p(0))


class Deadline:
    """What the watchdog did: `expired` once it raised TimeUp in the checked thread."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.expired = False


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[Deadline]:
    """Run the block with a deadline; at it, the block is stopped and `deadline.expired` is True afterwards.

    The block ends with TimeUp raised inside it (or, for a main thread stuck in one C call, the
    KeyboardInterrupt of the SIGINT sent a second later); either is swallowed here when it is ours. A
    learner's own Interrupt (before the deadline) passes through. Leaving the block cancels the
    watchdog and withdraws anything it sent that was not yet delivered, so nothing escapes later.
    """
    seconds = max(float(seconds), MIN_S)    # the watchdog must not fire while it is still being started
    deadline = Deadline(seconds)
    target = threading.get_ident()
    in_main = threading.current_thread() is threading.main_thread() and hasattr(signal, "pthread_kill")
    done = threading.Event()
    lock = threading.Lock()
    state = {"finished": False, "signalled": False}

    def watch() -> None:
        if done.wait(seconds):
            return
        with lock:
            if state["finished"]:
                return
            deadline.expired = True
            _raise_in(target, TimeUp)
        if in_main and not done.wait(GRACE_S):
            with lock:
                if not state["finished"]:
                    state["signalled"] = True
                    _raise_in(target, None)      # stuck in C: TimeUp never arrived; SIGINT replaces it
                    signal.pthread_kill(target, signal.SIGINT)

    # A process started in the background by a shell without job control (`cmd &` in a script) inherits SIGINT
    # ignored, and Python keeps it so: the SIGINT fallback would then do nothing (measured: a 30 s sleep ran to its
    # end). For the check's duration Python's own handler is put in place, and the inherited one restored after.
    inherited = signal.getsignal(signal.SIGINT) if in_main else None
    if in_main and not callable(inherited):
        signal.signal(signal.SIGINT, signal.default_int_handler)
    threading.Thread(target=watch, name="exercise-time-limit", daemon=True).start()
    try:
        yield deadline
    except (TimeUp, KeyboardInterrupt):
        if not deadline.expired:
            raise
    finally:
        _stop_watching(deadline, lock, state, done, target)
        if in_main and not callable(inherited):
            signal.signal(signal.SIGINT, inherited)


def _stop_watching(deadline: Deadline, lock: threading.Lock, state: dict, done: threading.Event,
                   target: int) -> None:
    """Cancel the watchdog; withdraw a TimeUp or SIGINT it sent that has not been delivered yet."""
    while True:
        try:
            with lock:
                state["finished"] = True
            break
        except (TimeUp, KeyboardInterrupt):   # delivered just now, while we wait for the lock
            if not deadline.expired:
                raise
    done.set()
    if deadline.expired:
        _raise_in(target, None)
    if state["signalled"]:
        with contextlib.suppress(KeyboardInterrupt):
            ctypes.pythonapi.PyErr_CheckSignals()   # run the pending SIGINT handler now, here
