"""Keep the corpus of learner questions true to the notebooks (issue 31).

``python tools/learner_questions.py sync``  sets each answer's section from the heading above its tagged cell in
                                           ``notebooks/src`` and rewrites the README's symptom index;
``python tools/learner_questions.py check`` exits 1 with a line per difference (the tests call ``problems()``),
                                           answers' evidence included (``tools/symptom_evidence.py``; its
                                           stated gaps are listed, not counted).
``python tools/learner_questions.py report`` the split: each half's questions by state (answered, out of scope,
                                           not answered yet, ungraded), and what each unanswered one needs.
``python tools/learner_questions.py packet PATH`` writes the grade half for a blind grader (id, question, topic,
                                           sources: no anchor, reason or hint) to PATH as JSON.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from notebooks import parse_source  # noqa: E402  (tools/notebooks.py)

from course_utils.chapters import ch09_symptoms  # noqa: E402

README = ROOT / "README.md"
START, END = "<!-- symptom-index:start -->", "<!-- symptom-index:end -->"


def tagged_cells() -> dict[str, list[tuple[int, str, dict]]]:
    """anchor -> [(chapter, section heading above the cell, the cell)] for every answers-<anchor> tag in the sources."""
    found: dict[str, list] = {}
    for src in sorted((ROOT / "notebooks" / "src").glob("[0-9][0-9]_*.py")):
        heading = ""
        for cell in parse_source(src.read_text(encoding="utf-8")):
            if cell["type"] == "markdown":
                heads = [line.lstrip("#").strip() for line in cell["source"].splitlines() if line.startswith("##")]
                heading = heads[-1] if heads else heading
                continue
            for tag in cell["tags"]:
                if tag.startswith(ch09_symptoms.TAG_PREFIX):
                    found.setdefault(tag[len(ch09_symptoms.TAG_PREFIX):], []).append((int(src.name[:2]), heading, cell))
    return found


def clean(heading: str) -> str:
    """A section heading as the index shows it: no numbering, no code marks."""
    words = heading.split(" ", 1)
    if len(words) == 2 and words[0].rstrip(".").isdigit():
        heading = words[1]
    return heading.replace("`", "")


def readme_block() -> str:
    return f"{START}\n{ch09_symptoms.index_markdown()}\n{END}"


def sync() -> None:
    data = json.loads(ch09_symptoms.DATA.read_text(encoding="utf-8"))
    cells = tagged_cells()
    for anchor, answer in data["answers"].items():
        if len(cells.get(anchor, ())) == 1:
            chapter, heading, _ = cells[anchor][0]
            answer["chapter"], answer["section"] = chapter, clean(heading)
    ch09_symptoms.DATA.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    ch09_symptoms.corpus.cache_clear()
    text = README.read_text(encoding="utf-8")
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    README.write_text(head + readme_block() + tail, encoding="utf-8")


def problems() -> list[str]:
    """Every way the corpus, the notebooks' tags and the README disagree."""
    answers, questions = ch09_symptoms.corpus()
    cells, out = tagged_cells(), []
    asked = {q.anchor for q in questions if q.anchor}
    for anchor in sorted(asked):
        a, found = answers[anchor], cells.get(anchor, [])
        if len(found) != 1:
            out.append(f"anchor {anchor}: {len(found)} cells carry the tag {ch09_symptoms.TAG_PREFIX}{anchor} (need 1)")
            continue
        chapter, heading, cell = found[0]
        if (chapter, clean(heading)) != (a.chapter, a.section):
            out.append(f"anchor {anchor}: the corpus says chapter {a.chapter} '{a.section}', the notebook "
                       f"chapter {chapter} '{clean(heading)}' (run sync)")
        if cell["type"] != "code" or {"nbval-ignore-output", "nbval-skip"} & set(cell["tags"]):
            out.append(f"anchor {anchor}: the tagged cell is not a code cell nbval compares")
    for anchor in sorted(set(cells) - set(answers)):
        out.append(f"tag {ch09_symptoms.TAG_PREFIX}{anchor} is in a notebook but not in the corpus's answers")
    if readme_block() not in README.read_text(encoding="utf-8"):
        out.append("README.md's symptom index is not the generated one (run sync)")
    return out


BLIND = ROOT / "tools" / "blind_grades.json"


def _grading_line(label: str, held_out: dict, calibration: dict) -> str:
    """One blind grading's counts: its held-out questions by grade, and its calibration's agreement."""
    from collections import Counter
    held = Counter(g["grade"] for g in held_out.values())
    n = sum(held.values())
    agree = sum(g["grade"] == "answered" for g in calibration.values())
    return (f"{label}: {n} questions: {held['answered']} answered, {held['partly']} partly, "
            f"{held['not answered']} not answered, {held['out of scope']} out of scope; answered "
            f"{held['answered'] / n:.0%} ({(held['answered'] + held['partly'] / 2) / n:.0%} with partly as half); "
            f"the grader found {agree} of the author's {len(calibration)} anchored calibration questions answered")


def blind_grading() -> str:
    """The held-out half's rate as readers who did not write the course graded it (tools/blind_grades.json): the
    questions held out first, and fresh sets collected and graded later (``fresh``, ``fresh_2``, ...), each by its
    own reader. A set whose halves were used the other way round (``fresh_3``: its write half kept unseen, its
    grade half written from) records its grades as ``held_out_write_half``."""
    graded = json.loads(BLIND.read_text(encoding="utf-8"))
    line = _grading_line("held out, graded blind", graded["held_out"], graded["calibration"])
    line += previous_grading(graded.get("previous"))
    for key in sorted(k for k in graded if k.startswith("fresh")):
        label = "a fresh set, collected and graded blind later" if key == "fresh" else \
            f"fresh set {key.split('_')[1]}, collected and graded blind later"
        line += "\n" + _grading_line(label, graded[key]["held_out"] or graded[key]["held_out_write_half"],
                                      graded[key]["calibration"])
        line += previous_grading(graded[key].get("previous"))
    return line


def previous_grading(previous: dict | None) -> str:
    """The grading before this one (before the author wrote from the set's other half, for a fresh set), by another
    reader, on the same held-out questions (its counts)."""
    if not previous:
        return ""
    counts = previous["held_out_counts"]
    return (f"\n  graded before by another reader, on the course of that time: {counts['answered']} answered, "
            f"{counts['partly']} partly, {counts['not answered']} not answered")


def report() -> str:
    """Each half's questions by state, its answered rate among the judged ones, and the unanswered questions."""
    lines = []
    for half, count in ch09_symptoms.halves().items():
        judged = count["anchored"] + count["out of scope"] + count["unanswered"]
        rate = f"{count['anchored'] / judged:.0%} of the {judged} judged" if judged else "none judged yet"
        lines.append(f"{half} half: {sum(count.values())} questions: {count['anchored']} answered, "
                     f"{count['out of scope']} out of scope, {count['unanswered']} not answered yet, "
                     f"{count['ungraded']} ungraded; answered: {rate}")
    lines.append(blind_grading())
    lines += [f"not answered yet, {qid}: {question}\n    needs: {need}"
              for qid, question, need in ch09_symptoms.unanswered_rows()]
    return "\n".join(lines)


if __name__ == "__main__":
    command = sys.argv[1:] or ["check"]
    if command == ["sync"]:
        sync()
    elif command == ["check"]:
        import symptom_evidence  # noqa: E402  (tools/symptom_evidence.py)
        found = problems() + symptom_evidence.problems()
        for anchor, reason in symptom_evidence.gaps():
            print(f"known gap, answer {anchor}: {reason}")
        print(f"{len(ch09_symptoms.unanswered_rows())} questions not answered yet, listed, not indexed "
              f"(python tools/learner_questions.py report)")
        print("\n".join(found) or "the corpus, the notebooks, the README and the answers' evidence agree")
        sys.exit(1 if found else 0)
    elif command == ["report"]:
        print(report())
    elif len(command) == 2 and command[0] == "packet":
        packet = ch09_symptoms.grade_packet()
        Path(command[1]).write_text(json.dumps(packet, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{len(packet)} questions of the grade half written to {command[1]}")
    else:
        print("usage: python tools/learner_questions.py sync|check|report|packet PATH", file=sys.stderr)
        sys.exit(2)
