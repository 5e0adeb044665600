"""The graph-memory meter, checked against activation sizes worked out by hand."""
import pytest
import torch
from torch import nn

from course_utils.engine.memory import CPU_KIND, CUDA_KIND, GraphMemoryMeter, count_new_nodes
from course_utils.engine.models import MLP

F32, I64 = 4, 8  # bytes per float32 / int64 element


def _model_and_batch(depth=1, batch=32):
    torch.manual_seed(0)
    return MLP(hidden=64, depth=depth), torch.randn(batch, 2), torch.randint(0, 3, (batch,))


def test_linear_relu_linear_on_batch_32_matches_the_hand_count():
    # Linear(2,64) -> ReLU -> Linear(64,3), cross-entropy, batch 32. What autograd saves:
    #   Linear 1 (addmm): its input x, to get dW1 ........................ 32*2  float32 =  256
    #   ReLU: its output, for the mask .................................. 32*64 float32 = 8192
    #   Linear 2 (addmm): its input, the same ReLU output (counted once) .................    0
    #                     and W2.t() for d(input): a parameter view, not counted ........    0
    #   log_softmax: its output ......................................... 32*3  float32 =  384
    #   nll_loss: that same output (counted once), the targets .......... 32    int64   =  256
    #             and total_weight, a 0-d float32 output .................................    4
    expected = 32 * 2 * F32 + 32 * 64 * F32 + 32 * 3 * F32 + 32 * I64 + F32
    assert expected == 9092
    model, x, y = _model_and_batch()
    meter = GraphMemoryMeter()
    with meter:
        loss = nn.functional.cross_entropy(model(x), y)
    assert meter.bytes == expected and meter.peak == expected
    loss.backward()                                   # backward frees what was saved
    assert meter.bytes == 0 and meter.peak == expected


def test_two_hidden_layers_add_one_more_relu_output():
    model, x, y = _model_and_batch(depth=2)
    meter = GraphMemoryMeter()
    with meter:
        nn.functional.cross_entropy(model(x), y).backward()
    assert meter.peak == 9092 + 32 * 64 * F32 == 17284
    assert meter.bytes == 0


def test_no_grad_saves_exactly_nothing():
    model, x, y = _model_and_batch()
    meter = GraphMemoryMeter()
    with torch.no_grad(), meter:
        nn.functional.cross_entropy(model(x), y)
    assert meter.bytes == 0 and meter.peak == 0


def test_a_kept_graph_keeps_its_bytes_until_dropped_and_graphs_add_up():
    model, x, y = _model_and_batch()
    meter = GraphMemoryMeter()
    kept = []
    for _ in range(3):
        with meter:
            kept.append(nn.functional.cross_entropy(model(x), y))
    # three live graphs; x and y are the same tensors in all three, so their storages count once
    shared = 32 * 2 * F32 + 32 * I64
    assert meter.bytes == 3 * 9092 - 2 * shared
    kept.clear()                                       # the meter holds no reference of its own
    assert meter.bytes == 0 and meter.peak == 3 * 9092 - 2 * shared


def test_reset_peak_starts_a_new_window():
    model, x, y = _model_and_batch()
    meter = GraphMemoryMeter()
    with meter:
        nn.functional.cross_entropy(model(x), y).backward()
    meter.reset_peak()
    assert meter.peak == 0


def test_a_saved_view_counts_its_whole_storage():
    model, _, y = _model_and_batch()
    big = torch.randn(64, 2)
    meter = GraphMemoryMeter()
    with meter:
        loss = nn.functional.cross_entropy(model(big[:32]), y)
    assert meter.bytes == 9092 + 32 * 2 * F32          # the view keeps all 64 rows alive
    del loss


def test_kind_says_what_is_measured():
    assert GraphMemoryMeter().kind == CPU_KIND
    assert "saved for backward" in CPU_KIND and "allocator" in CUDA_KIND


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_meter_reads_the_allocator():
    torch.manual_seed(0)
    model = MLP().cuda()
    x, y = torch.randn(256, 2, device="cuda"), torch.randint(0, 3, (256,), device="cuda")
    meter = GraphMemoryMeter("cuda")
    with meter:
        loss = nn.functional.cross_entropy(model(x), y)
    assert meter.kind == CUDA_KIND and meter.bytes > 0 and meter.peak >= meter.bytes
    del loss


def test_count_new_nodes_counts_each_node_once():
    a = torch.ones(3, requires_grad=True)
    b = (a * 2).exp()                                   # AccumulateGrad <- MulBackward <- ExpBackward
    seen = set()
    assert count_new_nodes(b.grad_fn, seen) == 3
    c = b.sum()                                         # one new node on top of the three seen
    assert count_new_nodes(c.grad_fn, seen) == 1
    assert count_new_nodes(None, seen) == 0
