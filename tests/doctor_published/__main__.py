"""Print the doctor's scorecard on the published loops: python -m tests.doctor_published."""
import time

import torch

from tests.doctor_published import LOOPS, cases, run_case, scorecard, state_bytes

torch.set_num_threads(1)
all_cases, reports, same, start = cases(), {}, 0, time.process_time()
for case in all_cases:
    bare, _ = run_case(case, doctor=False)
    watched, reports[case.name] = run_case(case, doctor=True)
    same += state_bytes(bare) == state_bytes(watched)
published = [c for c in all_cases if c.variant == "published"]
correct = [c for c in all_cases if not c.expected]
print(f"published corpus: {len(LOOPS)} loops, {len(all_cases)} cases ({len(correct)} correct, "
      f"{len(all_cases) - len(correct)} with bugs); {time.process_time() - start:.1f} s CPU")
print(f"findings on correct loops: {sum(bool(reports[c.name].names) for c in correct)} of {len(correct)}; "
      f"exact findings: {sum(set(reports[c.name].names) == c.expected for c in all_cases)} of {len(all_cases)}; "
      f"weights and optimizer state bitwise equal with and without the doctor: {same} of {len(all_cases)}")
for case in published:
    if case.expected:
        print(f"real bug in {case.loop}: {', '.join(sorted(case.expected))}")
rows = scorecard(reports, all_cases)
tp, fp, fn = (sum(r[i] for r in rows) for i in (1, 2, 3))
print(f"| {'finding':30} | TP | FP | FN | precision | recall |")
print(f"|{'-' * 32}|----|----|----|-----------|--------|")
for name, t, f, n, precision, recall in rows:
    print(f"| {name:30} | {t:2} | {f:2} | {n:2} | {precision:9.2f} | {recall:6.2f} |")
print(f"| {'all findings':30} | {tp:2} | {fp:2} | {fn:2} | {tp / (tp + fp):9.2f} | {tp / (tp + fn):6.2f} |")
