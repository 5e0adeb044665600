"""The mechanism map (issue 43): ``course_utils/chapters/torch_map.json``, from torch and the notebooks.

    python tools/torch_map.py sync     rewrite the map: items from the installed torch, "demonstrated" from the
                                       committed notebooks' compared cells (torch_map_cells), out-of-scope
                                       reasons kept from the file, everything else not_yet
    python tools/torch_map.py check    exit 1 when torch's surface and the file disagree, or a "demonstrated"
                                       claim is no longer what the code shows; items a sync would now mark
                                       demonstrated are listed, not failed
    python tools/torch_map.py report   counts by group and the not_yet items
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from course_utils.chapters import torch_map  # noqa: E402
from course_utils.chapters.torch_map_cells import Analysis, claim_problems, committed_notebooks  # noqa: E402


def found(items: list[torch_map.Item]) -> dict[str, list[dict]]:
    return Analysis(committed_notebooks()).find(items)


def report(mapping: dict) -> str:
    counts = torch_map.counts(mapping)
    width = max(map(len, counts))
    lines = [f"{'group':<{width}}  items  demonstrated  out of scope  not yet"]
    total = {"items": 0, "demonstrated": 0, "out_of_scope": 0, "not_yet": 0}
    for group, c in counts.items():
        lines.append(f"{group:<{width}}  {c['items']:>5}  {c['demonstrated']:>12}  {c['out_of_scope']:>12}  "
                     f"{c['not_yet']:>7}")
        for k in total:
            total[k] += c[k]
    lines.append(f"{'all':<{width}}  {total['items']:>5}  {total['demonstrated']:>12}  {total['out_of_scope']:>12}  "
                 f"{total['not_yet']:>7}")
    lines.append("")
    for group, rows in mapping["groups"].items():
        waiting = [e["id"] for e in rows if e["status"] == "not_yet"]
        if waiting:
            lines.append(f"not yet, {group}: " + ", ".join(waiting))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    command = argv[1] if len(argv) > 1 else "check"
    items = torch_map.surface()
    if command == "sync":
        previous = torch_map.load() if torch_map.DATA.exists() else None
        mapping = torch_map.build(items, found(items), previous)
        torch_map.dump(mapping)
        print(report(mapping))
        return 0
    mapping = torch_map.load()
    if command == "report":
        print(report(mapping))
        return 0
    if command != "check":
        print(__doc__)
        return 2
    places = found(items)
    problems = (torch_map.surface_problems(mapping, items) + torch_map.entry_problems(mapping)
                + claim_problems(mapping, places))
    newly = [i for i, e in torch_map.entries(mapping).items() if e["status"] != "demonstrated" and places.get(i)]
    if newly:
        print("a sync would mark these demonstrated now:", ", ".join(newly))
    print("\n".join(problems) or "the map agrees with torch and with the notebooks")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
