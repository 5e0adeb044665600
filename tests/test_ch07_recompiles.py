"""Chapter 7: the counting backend's compilations against Dynamo's own rules."""
from course_utils.chapters.ch07_recompiles import LENGTHS, compilations, recompile_lines


def test_static_shapes_compile_once_per_shape_up_to_the_limit_then_run_uncompiled():
    import torch._dynamo
    limit = torch._dynamo.config.recompile_limit
    r = compilations(LENGTHS, dynamic=False)
    distinct = len(set(LENGTHS))
    assert distinct > limit
    assert r["compilations"] == limit
    # batches whose size was not among the first `limit` distinct sizes ran without a compiled graph
    first = []
    for n in LENGTHS:
        if n not in first and len(first) < limit:
            first.append(n)
    assert r["batches run uncompiled"] == sum(n not in first for n in LENGTHS)
    assert r["sizes run uncompiled"] == [n for n in LENGTHS if n not in first]
    assert r["recompile-limit warnings"] == 1                  # Dynamo says so once, in its log
    again = compilations(LENGTHS + tuple(first) + (77,), dynamic=False)      # past the limit: old shapes keep code
    assert again["sizes run uncompiled"] == [n for n in LENGTHS if n not in first] + [77]


def test_one_shape_compiles_once_and_the_default_turns_dynamic_at_the_second_shape():
    assert compilations([16] * 4) == {"compilations": 1, "batches run uncompiled": 0, "recompile-limit warnings": 0,
                                      "sizes run uncompiled": []}
    assert compilations([16, 16, 9, 30, 9]) == {"compilations": 2, "batches run uncompiled": 0,
                                                 "recompile-limit warnings": 0, "sizes run uncompiled": []}
    assert compilations([16, 9, 30], dynamic=True)["compilations"] == 1
    assert compilations([16, 9, 30, 1])["compilations"] == 3          # size 1 is specialised: compiled again
    assert compilations([16, 9, 30, 2])["compilations"] == 2
    assert len(recompile_lines()) == 8
