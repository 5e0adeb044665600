"""Chapter 7's flowchart view, driven headless: each switch changes the flowchart and the code together."""
from course_utils.chapters.ch07_flowchart import BY_KEY, KEYS, assemble, code_lines
from course_utils.chapters.ch07_flowchart_boxes import NODES
from course_utils.widgets.base import RUN_HINT
from course_utils.widgets.flowchart_view import FlowchartView, flowchart_svg, flowchart_view


def test_opens_minimal_and_every_switch_adds_its_code_and_boxes():
    view = flowchart_view()
    assert view.text().startswith(f"Production loop: 0 of {len(KEYS)} components on: none")
    minimal_board = view.board.value
    for key in KEYS:
        view.toggle(key)
        assert view.enabled == {key}
        assert f"{code_lines([key])} lines of code" in view.board.value
        assert BY_KEY[key].label in view.message.value and "added" in view.message.value
        assert BY_KEY[key].label in view.text()
        assert view.board.value != minimal_board
        view.toggle(key)
        assert view.enabled == frozenset() and "removed" in view.message.value
        assert view.board.value == minimal_board  # back to the minimal loop, box for box
    assert view._repr_mimebundle_()["text/plain"] == view.text() + "\n" + RUN_HINT


def test_code_shown_is_the_assembled_code():
    import html
    import re
    view = flowchart_view("checkpoint", "amp")
    shown = re.findall(r"</span>(.*?)</div>", view.code.html)
    assert [html.unescape(line).rstrip() if line != " " else "" for line in shown] == assemble(
        ["checkpoint", "amp"]).splitlines()


def test_presets_and_checkbox_state_stay_in_sync():
    view = FlowchartView()
    view.all_button.click()
    assert view.enabled == frozenset(KEYS) and all(box.value for box in view.boxes.values())
    assert f"{len(KEYS)} of {len(KEYS)} components on" in view.text()
    assert f"All {len(KEYS)} components on: {code_lines(KEYS)} lines" in view.message.value
    view.boxes["compile"].value = False
    assert "compile" not in view.enabled and "torch.compile" not in view.text().split("\n")[0]
    view.minimal_button.click()
    assert view.enabled == frozenset() and not any(box.value for box in view.boxes.values())
    assert f"The minimal loop: {code_lines(())} lines" in view.message.value


def test_unknown_component_is_a_message_not_a_traceback():
    view = FlowchartView(("seed",))
    view.set_components(["warp_drive"])
    assert "no component called warp_drive" in view.message.value and view.enabled == {"seed"}


def test_svg_draws_every_box_in_every_state():
    for enabled in (frozenset(), frozenset(KEYS), frozenset({"amp"})):
        svg = flowchart_svg(enabled)
        assert svg.count("<rect") == len(NODES)  # same boxes, same height: no layout jumps
        assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert 'stroke-dasharray' not in flowchart_svg(frozenset(KEYS))
    assert flowchart_svg(frozenset()).count("stroke-dasharray") == sum(n.component is not None for n in NODES)


def test_the_message_counts_exactly_the_tinted_rows_and_says_where_they_start():
    """Issue 27: "N lines tinted below" equals the rows the code box tints, for every component."""
    import re
    from course_utils.widgets.flowchart_view import tinted_lines
    for key in KEYS:
        view = flowchart_view("seed")
        if key == "seed":
            view = flowchart_view()
        view.toggle(key)
        tinted = view.code.html.count("data-tinted")
        said = re.search(r"the (\d+) lines it adds or changes are tinted below \(from line (\d+)\)", view.message.value)
        assert said and int(said.group(1)) == tinted == len(tinted_lines(view.enabled, key)), key
        assert int(said.group(2)) == tinted_lines(view.enabled, key)[0]
        view.toggle(key)
        assert "data-tinted" not in view.code.html and "lines gone" in view.message.value


def test_every_component_has_its_own_colour_and_a_legend_beside_its_checkbox():
    from course_utils.widgets.flowchart_view import COLOURS
    assert set(COLOURS) == set(KEYS) and len(set(COLOURS.values())) == len(KEYS)
    rgb = {k: tuple(int(c[i:i + 2], 16) for i in (1, 3, 5)) for k, c in COLOURS.items()}
    closest = min(sum((a - b) ** 2 for a, b in zip(rgb[x], rgb[y])) ** 0.5 for x in KEYS for y in KEYS if x < y)
    assert closest > 60                                    # no two alike (the old palette had pairs under 40)
    view = flowchart_view()
    grid = view.widget.children[0]
    for cell, key in zip(grid.children, KEYS):
        swatch, box = cell.children
        assert COLOURS[key] in swatch.value and box is view.boxes[key]
    width = sum(int(c.layout.width.removesuffix("px")) for c in grid.children[:4]) + 3 * 6
    assert width <= 848
