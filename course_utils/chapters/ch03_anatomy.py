"""Chapter 3: one training step taken apart.

``tiny_step`` works the hand calculation with plain Python formulas; ``tiny_step_autograd`` gets
the same numbers from torch (TinyLinear, MSELoss, SGD), so the two can be compared number by
number. ``StepThrough`` runs the operations of one step one at a time on TinyLinear and records
what each one read and wrote (the step-through widget drives it).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import torch
from torch import nn

from course_utils.engine.models import TinyLinear

X = (1.0, 2.0)
T = (1.0, 0.0)
LR = 0.01
OPERATIONS = ("zero_grad", "forward", "loss", "backward", "clip", "step")

Vec = tuple[float, ...]
Mat = tuple[Vec, ...]


@dataclass(frozen=True)
class TinyStep:
    """Every number of the chapter-3 hand calculation (one SGD step on TinyLinear)."""

    x: Vec
    t: Vec
    W: Mat
    b: Vec
    y: Vec            # W x + b
    loss: float       # MSE: mean over the two outputs
    dL_dy: Vec        # 2 (y - t) / 2 = y - t
    dL_dW: Mat        # outer(dL/dy, x)
    dL_db: Vec        # dL/dy
    W_new: Mat        # W - lr dL/dW
    b_new: Vec        # b - lr dL/db
    y_new: Vec        # forward again with the new weights
    loss_new: float


def tiny_step(lr: float = LR, x: Vec = X, t: Vec = T) -> TinyStep:
    """The hand calculation, written out with plain Python arithmetic (no autograd)."""
    W = ((0.5, -0.3), (0.2, 0.8))
    b = (0.0, 0.0)
    n = len(t)

    def affine(W, b):
        return tuple(sum(W[i][j] * x[j] for j in range(len(x))) + b[i] for i in range(len(b)))

    def mse(y):
        return sum((y[i] - t[i]) ** 2 for i in range(n)) / n

    y = affine(W, b)
    loss = mse(y)
    dL_dy = tuple(2 * (y[i] - t[i]) / n for i in range(n))          # d/dy_i of mean (y - t)^2
    dL_dW = tuple(tuple(dL_dy[i] * x[j] for j in range(len(x))) for i in range(n))  # y_i = sum_j W_ij x_j + b_i
    dL_db = dL_dy
    W_new = tuple(tuple(W[i][j] - lr * dL_dW[i][j] for j in range(len(x))) for i in range(n))
    b_new = tuple(b[i] - lr * dL_db[i] for i in range(n))
    y_new = affine(W_new, b_new)
    return TinyStep(tuple(x), tuple(t), W, b, y, loss, dL_dy, dL_dW, dL_db, W_new, b_new, y_new, mse(y_new))


def _vec(t: torch.Tensor) -> Vec:
    return tuple(float(v) for v in t.detach().reshape(-1).tolist())


def _mat(t: torch.Tensor) -> Mat:
    return tuple(tuple(float(v) for v in row) for row in t.detach().tolist())


def tiny_step_autograd(lr: float = LR, x: Vec = X, t: Vec = T) -> TinyStep:
    """The same step done by torch: TinyLinear, nn.MSELoss, loss.backward(), torch.optim.SGD (float64)."""
    model = TinyLinear().double()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    xs = torch.tensor(x, dtype=torch.float64)
    ts = torch.tensor(t, dtype=torch.float64)
    W0, b0 = _mat(model.weight), _vec(model.bias)
    y = model(xs)
    y.retain_grad()                      # keep dL/dy, an intermediate, to compare it too
    loss = nn.functional.mse_loss(y, ts)
    optimizer.zero_grad()
    loss.backward()
    grads = _vec(y.grad), _mat(model.weight.grad), _vec(model.bias.grad)
    optimizer.step()
    with torch.no_grad():
        y_new = model(xs)
        loss_new = nn.functional.mse_loss(y_new, ts)
    return TinyStep(tuple(x), tuple(t), W0, b0, _vec(y), loss.item(), *grads, _mat(model.weight),
                    _vec(model.bias), _vec(y_new), loss_new.item())


def max_difference(a: TinyStep, b: TinyStep) -> float:
    """The largest absolute difference between two TinyStep records, over every number in them."""
    def flat(v):
        if isinstance(v, tuple):
            return [z for item in v for z in flat(item)]
        return [float(v)]
    names = TinyStep.__dataclass_fields__
    return max(abs(p - q) for name in names for p, q in zip(flat(getattr(a, name)), flat(getattr(b, name))))


# --- one Adam step by hand -------------------------------------------------------------------

@dataclass(frozen=True)
class AdamStep:
    """Chapter 3's first Adam step on TinyLinear's W, worked with plain arithmetic, and torch's result."""

    grad: Mat          # g = dL/dW (the same gradient as the SGD hand calculation)
    m: Mat             # first moment  m = beta1 * 0 + (1 - beta1) * g
    v: Mat             # second moment v = beta2 * 0 + (1 - beta2) * g^2
    m_hat: Mat         # bias-corrected m / (1 - beta1^1) = g
    v_hat: Mat         # bias-corrected v / (1 - beta2^1) = g^2
    update: Mat        # lr * m_hat / (sqrt(v_hat) + eps): about lr * sign(g) at the first step
    W_new: Mat
    torch_W_new: Mat   # torch.optim.Adam on the same model, loss and lr (float64)


def adam_step_by_hand(lr: float = LR, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> AdamStep:
    """Adam's first update on TinyLinear's W, by hand and by torch.optim.Adam (chapter 3)."""
    beta1, beta2 = betas
    hand = tiny_step(lr)
    g = hand.dL_dW

    def each(f, *mats):
        return tuple(tuple(f(*vals) for vals in zip(*rows)) for rows in zip(*mats))

    m = each(lambda gi: (1 - beta1) * gi, g)
    v = each(lambda gi: (1 - beta2) * gi * gi, g)
    m_hat = each(lambda mi: mi / (1 - beta1), m)
    v_hat = each(lambda vi: vi / (1 - beta2), v)
    update = each(lambda mh, vh: lr * mh / (vh ** 0.5 + eps), m_hat, v_hat)
    W_new = each(lambda w, u: w - u, hand.W, update)
    model = TinyLinear().double()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=betas, eps=eps)
    nn.functional.mse_loss(model(torch.tensor(X, dtype=torch.float64)), torch.tensor(T, dtype=torch.float64)).backward()
    optimizer.step()
    return AdamStep(g, m, v, m_hat, v_hat, update, W_new, _mat(model.weight))


@dataclass(frozen=True)
class MomentumSteps:
    """Two SGD-with-momentum updates of TinyLinear's W on the same example, by hand and by torch (chapter 3)."""

    g1: Mat          # the first gradient
    v1: Mat          # the buffer after step 1: v = g1
    W1: Mat          # W - lr v1: the same as plain SGD
    g2: Mat          # the gradient at W1
    v2: Mat          # mu v1 + g2
    W2: Mat          # W1 - lr v2
    torch_W1: Mat
    torch_W2: Mat


def momentum_steps_by_hand(lr: float = LR, mu: float = 0.9) -> MomentumSteps:
    """SGD with momentum (v <- mu v + g; w <- w - lr v), two steps by hand and by torch.optim.SGD (chapter 3)."""
    first = tiny_step(lr)

    def each(f, *mats):
        return tuple(tuple(f(*vals) for vals in zip(*rows)) for rows in zip(*mats))

    v1 = first.dL_dW
    W1 = each(lambda w, v: w - lr * v, first.W, v1)
    dL_dy2 = tuple(2 * (y - t) / len(T) for y, t in zip(first.y_new, T))   # the gradient at the new weights
    g2 = tuple(tuple(d * xj for xj in X) for d in dL_dy2)
    v2 = each(lambda a, b: mu * a + b, v1, g2)
    W2 = each(lambda w, v: w - lr * v, W1, v2)
    model = TinyLinear().double()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=mu)
    x, t = torch.tensor(X, dtype=torch.float64), torch.tensor(T, dtype=torch.float64)
    seen = []
    for _ in range(2):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), t).backward()
        optimizer.step()
        seen.append(_mat(model.weight))
    return MomentumSteps(first.dL_dW, v1, W1, g2, v2, W2, seen[0], seen[1])


# --- the step-through engine ------------------------------------------------------------------

@dataclass
class Record:
    """One operation as it ran: what it read, what it wrote, and a one-line note."""

    operation: str
    reads: str
    writes: str
    note: str
    ok: bool = True


READS_WRITES = {
    "zero_grad": ("nothing", "W.grad, b.grad ← None"),
    "forward": ("x, W, b", "y (and the autograd graph)"),
    "loss": ("y, t", "L, a scalar with a grad_fn"),
    "backward": ("L's graph", "W.grad, b.grad (added to what is there)"),
    "clip": ("W.grad, b.grad", "W.grad, b.grad rescaled if their global norm > max_norm"),
    "step": ("W, b, W.grad, b.grad, lr", "W, b"),
}


@dataclass
class StepThrough:
    """TinyLinear with SGD, driven one operation at a time; every call appends a Record to ``history``.

    The operations may be run in any order: an operation that cannot run (backward before any
    loss, say) records why instead of raising, so a learner can try the wrong orders safely.
    """

    lr: float = LR
    max_norm: float = 10.0   # one backward gives norm 5.167 (untouched); two accumulated give 10.33 (clipped)
    history: list[Record] = field(default_factory=list)

    def __post_init__(self):
        self.reset()

    def reset(self) -> None:
        """Fresh weights (W = [[0.5, -0.3], [0.2, 0.8]], b = 0), no grads, no outputs, empty history."""
        self.model = TinyLinear()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=self.lr)
        self.x = torch.tensor(X)
        self.t = torch.tensor(T)
        self.y: torch.Tensor | None = None
        self.L: torch.Tensor | None = None
        self.grad_norm: float | None = None
        self.changed: set[str] = set()     # which tensors the last operation wrote
        self.stale: set[str] = set()       # y and L computed with weights a step has since changed
        self.history = []

    # each operation ------------------------------------------------------------------------
    def _record(self, op: str, note: str, ok: bool = True, changed: set[str] = frozenset()) -> Record:
        reads, writes = READS_WRITES[op]
        rec = Record(op, reads, writes if ok else "nothing", note, ok)
        self.history.append(rec)
        self.changed = set(changed) if ok else set()
        return rec

    def zero_grad(self) -> Record:
        self.optimizer.zero_grad()   # set_to_none=True: the default since torch 2.0
        return self._record("zero_grad", "every .grad is now None (set_to_none=True, the default)",
                            changed={"W.grad", "b.grad"})

    def forward(self) -> Record:
        self.y = self.model(self.x)
        self.L = None
        self.stale = set()
        return self._record("forward", f"y = W x + b = {_fmt(self.y)}; grad_fn={type(self.y.grad_fn).__name__}",
                            changed={"y"})

    def loss(self) -> Record:
        if self.y is None:
            return self._record("loss", "no output y yet: run forward first", ok=False)
        self.L = nn.functional.mse_loss(self.y, self.t)
        return self._record("loss", f"L = mean((y - t)²) = {self.L.item():.6g}; "
                                    f"grad_fn={type(self.L.grad_fn).__name__}", changed={"L"})

    def backward(self) -> Record:
        if self.L is None:
            return self._record("backward", "no loss to differentiate: run forward and loss first", ok=False)
        try:
            self.L.backward()
        except RuntimeError:
            return self._record("backward", "this loss's graph was already used and freed: run forward and "
                                            "loss again", ok=False)
        return self._record("backward", f"W.grad = {_fmt(self.model.weight.grad)}, b.grad = "
                                        f"{_fmt(self.model.bias.grad)}", changed={"W.grad", "b.grad"})

    def clip(self) -> Record:
        params = list(self.model.parameters())
        if all(p.grad is None for p in params):
            return self._record("clip", "no gradients to clip (grads are None): clipping does nothing here",
                                ok=False)
        norm = float(torch.nn.utils.clip_grad_norm_(params, self.max_norm))
        self.grad_norm = norm
        scaled = norm > self.max_norm
        note = (f"global norm {norm:.4g} > {self.max_norm:g}: grads scaled by {self.max_norm / norm:.4g}"
                if scaled else f"global norm {norm:.4g} <= {self.max_norm:g}: grads unchanged")
        return self._record("clip", note, changed={"W.grad", "b.grad"} if scaled else set())

    def step(self) -> Record:
        if all(p.grad is None for p in self.model.parameters()):
            self.optimizer.step()
            return self._record("step", "no gradients: SGD skips parameters whose .grad is None; weights unchanged",
                                ok=False)
        self.optimizer.step()
        self.stale = {name for name, value in (("y", self.y), ("L", self.L)) if value is not None}
        return self._record("step", f"W ← W − {self.lr:g}·W.grad = {_fmt(self.model.weight)}, "
                                    f"b = {_fmt(self.model.bias)}", changed={"W", "b"})

    def run(self, operation: str) -> Record:
        """Run one operation by name (one of OPERATIONS)."""
        if operation not in OPERATIONS:
            raise ValueError(f"operation must be one of {OPERATIONS}, got {operation!r}")
        return getattr(self, operation)()

    # what is there now ------------------------------------------------------------------------
    def tensors(self) -> dict[str, torch.Tensor | None]:
        """The tensors of the step by name, as they are now (None where not computed / cleared)."""
        return {"x": self.x, "t": self.t, "W": self.model.weight.detach(), "b": self.model.bias.detach(),
                "y": None if self.y is None else self.y.detach(), "L": None if self.L is None else self.L.detach(),
                "W.grad": self.model.weight.grad, "b.grad": self.model.bias.grad}


def _fmt(t: torch.Tensor | None) -> str:
    """A tensor's values with at most 4 significant digits (stable text)."""
    if t is None:
        return "None"
    values = t.detach().tolist()

    def f(v):
        return "[" + ", ".join(f(z) for z in v) + "]" if isinstance(v, list) else f"{v:.4g}"
    return f(values)


def fmt(t: torch.Tensor | None) -> str:
    """Public name of the formatter (the notebook and the widget print tensors through it)."""
    return _fmt(t)


def scheduler_before_optimizer_warning() -> str:
    """Call scheduler.step() before optimizer.step() and return the warning torch gives (chapter 3)."""
    model = TinyLinear()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scheduler.step()
        optimizer.step()
    messages = [str(w.message) for w in caught if "lr_scheduler.step()" in str(w.message)]
    return messages[0] if messages else ""
