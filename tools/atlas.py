"""Keep the atlas's recorded messages true to torch (issue 39).

``python tools/atlas.py sync``   runs every entry (and its variants) and writes course_utils/atlas/messages.json,
                                 and the optimizers' state names torch gives (optimizer_state_names.json);
``python tools/atlas.py check``  exits 1 with a line per entry whose run differs from the file (the tests call
                                 ``problems()``).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from course_utils.atlas import ENTRIES  # noqa: E402
from course_utils.atlas.lookup import MESSAGES  # noqa: E402
from course_utils.atlas.optimizer_keys import RECORDED, optimizer_state_names  # noqa: E402
from course_utils.atlas.runner import run_entry  # noqa: E402


def current() -> dict[str, dict]:
    """What the entries give now: per entry, the type and each params set's message (and whether all is well)."""
    out = {}
    for entry in ENTRIES:
        runs = [run_entry(entry, v) for v in range(1 if entry.not_run else len(entry.params))]
        out[entry.id] = {"type": entry.expect, "messages": [r.message for r in runs],
                         "ok": all(r.ok or entry.not_run for r in runs)}
    return out


def problems() -> list[str]:
    now = current()
    saved = json.loads(MESSAGES.read_text(encoding="utf-8")) if MESSAGES.exists() else {}
    found = [f"{key}: raised {value['type']} not as expected, or its fix failed" for key, value in now.items()
             if not value["ok"]]
    found += [f"{key}: the recorded messages differ from the run's (run tools/atlas.py sync)"
              for key, value in now.items() if saved.get(key, {}).get("messages") != value["messages"]]
    found += [f"{key}: recorded but no longer in the atlas" for key in saved if key not in now]
    names = json.loads(RECORDED.read_text(encoding="utf-8")) if RECORDED.exists() else None
    if names != sorted(optimizer_state_names()):
        found.append(f"{RECORDED.name}: the optimizers' state names differ from torch's (run tools/atlas.py sync)")
    return found


def main(argv: list[str]) -> int:
    if argv[:1] == ["sync"]:
        now = current()
        MESSAGES.write_text(json.dumps({k: {"type": v["type"], "messages": v["messages"]} for k, v in now.items()},
                                       indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        RECORDED.write_text(json.dumps(sorted(optimizer_state_names()), indent=1) + "\n", encoding="utf-8")
        bad = [k for k, v in now.items() if not v["ok"]]
        print(f"{len(now)} entries recorded" + (f"; not as expected: {', '.join(bad)}" if bad else ""))
        return 1 if bad else 0
    if argv[:1] == ["check"]:
        found = problems()
        print("\n".join(found) or "the atlas and its recorded messages agree")
        return 1 if found else 0
    print("usage: tools/atlas.py sync|check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
