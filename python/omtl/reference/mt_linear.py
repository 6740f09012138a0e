"""Reference MTLinear (docs/mt_linear.md): the feature map and the update, coordinate by coordinate."""

from __future__ import annotations

import math
import sys
from collections import OrderedDict

import numpy as np
from scipy.sparse.csgraph import connected_components

from .. import learners
from ._core import ReferenceCore
from .graph import task_kernel

M64 = (1 << 64) - 1


INTERCEPT_KEY = M64  # the intercept's key under hashing (never a feature index)
SHARED = 2**32 - 1  # the complete graph's shared block: its id and hash seed, whatever k


def slot_of(key: int, seed: int, n_slots: int) -> int:
    """The table cell of a key of the block hashed with ``seed``: MurmurHash3's 64-bit finaliser
    of the key mixed with the seed, reduced to [0, n_slots) by multiply-shift."""
    k = key ^ ((seed * 0x9E3779B97F4A7C15) & M64)
    for mult in (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53):
        k ^= k >> 33
        k = (k * mult) & M64
    k ^= k >> 33
    return (k * n_slots) >> 64


def factor_terms(graph):
    """Per task, the list of (block, B[block, task]) with B^T B = T; and the number of blocks."""
    k = graph.n_tasks
    T = task_kernel(graph)
    complete = graph.kind in ("complete", "complete_open")
    if graph.kind == "disconnected" or (complete and k == 1):
        return [[(i, math.sqrt(T[i, i]))] for i in range(k)], k
    if complete:
        own, shared = math.sqrt(T[0, 0] - T[0, 1]), math.sqrt(T[0, 1])
        return [[(i, own), (SHARED, shared)] for i in range(k)], k + 1
    scale = np.abs(T).max()
    n_comp, comp = connected_components(np.abs(T) > 1e-12 * scale, directed=False)
    terms = [[] for _ in range(k)]
    for c in range(n_comp):
        members = np.flatnonzero(comp == c)
        values, vectors = np.linalg.eigh(T[np.ix_(members, members)])
        root = (vectors * np.sqrt(np.maximum(values, 0.0))) @ vectors.T  # symmetric square root
        for b, i in enumerate(members):
            terms[i] = [(int(s), float(root[a, b])) for a, s in enumerate(members) if root[a, b] != 0.0]
    return terms, k


def components_of(graph, k):
    if graph.kind in ("complete", "complete_open"):
        return np.zeros(k, dtype=np.int64)
    if graph.kind == "disconnected":
        return np.arange(k)
    T = task_kernel(graph)
    return connected_components(np.abs(T) > 1e-12 * np.abs(T).max(), directed=False)[1]


def loss_value(loss, y, p):
    m = y * p
    if loss == "logistic":
        return max(-m, 0.0) + math.log1p(math.exp(-abs(m)))
    if loss == "hinge":
        return max(0.0, 1.0 - m)
    return 0.5 * (y - p) ** 2


def loss_derivative(loss, y, p):
    m = y * p
    if loss == "logistic":
        return -y / (1.0 + math.exp(m)) if m < 700 else 0.0
    if loss == "hinge":
        return -y if m < 1.0 else 0.0
    return p - y


def logistic_gain(m0, a):
    """delta with delta + e^m0 (e^delta - 1) = a (the logistic flow), by bisection."""
    q = math.exp(min(m0, 700.0))
    lo, hi = 0.0, min(a / (1.0 + q), math.log1p(a / q))
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if mid + q * math.expm1(mid) - a > 0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


def invariant_step(loss, y, p, eta, h):
    """s such that the prediction moves to p + h s along the gradient flow for time eta."""
    if loss == "logistic":
        return y * logistic_gain(y * p, eta * h) / h
    if loss == "hinge":
        return y * min(eta, (1.0 - y * p) / h)
    return (y - p) * (1.0 - math.exp(-eta * h)) / h


def logistic_proximal_gain(m0, a):
    """delta >= 0 with delta (1 + e^(m0 + delta)) = a (AROW's logistic step), by bisection below
    the bounds a/(1 + e^m0) and max(1, ln a - m0)."""
    if a <= 0:
        return 0.0
    lo, hi = 0.0, min(a / (1.0 + math.exp(min(m0, 700.0))), max(1.0, math.log(a) - m0))
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if mid * (1.0 + math.exp(min(m0 + mid, 700.0))) - a > 0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


def proximal_step(loss, y, p, eta, v):
    """AROW's step: s with w_c += s Sigma_c u_c, the margin gain minimising
    delta^2/(2v) + eta * loss~(m + delta) (squared hinge for "hinge": AROW's own step)."""
    if loss == "logistic":
        return y * logistic_proximal_gain(y * p, eta * v) / v
    if loss == "hinge":
        return y * max(0.0, 1.0 - y * p) * eta / (1.0 + eta * v)
    return (y - p) * eta / (1.0 + eta * v)


class MTLinearCore(ReferenceCore):
    """The cells live in a dict keyed by (block, key) without hashing (every coordinate its own
    cell), and by table slot under hashing (one table of 2**hash_bits cells shared by every block,
    the block's id as the hash seed)."""

    def __init__(self, graph, n_features, *, loss, update, learning_rate, fit_intercept, hash_bits, shared_rate,
                 max_bytes=None, tail_bits=None):
        self.graph = graph
        self.loss, self.rule, self.eta, self.rho = loss, update, learning_rate, shared_rate
        self.d, self.intercept = n_features, fit_intercept
        self.bits = hash_bits
        self.terms, _ = factor_terms(graph)
        self.comp = components_of(graph, graph.n_tasks)
        n_comp = int(self.comp.max()) + 1
        self.t = np.zeros(n_comp)  # examples per component (the SGD clock)
        self.n_norm = np.zeros(n_comp)  # updating examples per component
        self.sum_norm_x = np.zeros(n_comp)
        # Single precision, as the native cells (M.5): read into Python floats (f64), computed
        # there, rounded to f32 once per value written.
        self.W, self.G, self.N = {}, {}, {}
        self.n_updates = 0
        # The user budget (docs/lifecycle.md): resident users oldest first, the users that read
        # the tail, the tail's weights (single precision, as the engine's).
        self.max_bytes, self.tail_bits = max_bytes, tail_bits
        self.residents = OrderedDict()
        self.folded = set()
        self.tail = np.zeros(2**tail_bits, dtype=np.float32) if tail_bits is not None else None
        self.n_evicted = 0
        if max_bytes is not None and self.reserved_bytes(graph.n_tasks) >= max_bytes:
            raise ValueError(f"max_bytes: {max_bytes} bytes cannot hold the state of {graph.n_tasks} users and any weight")

    # ---- the user budget (docs/lifecycle.md, the rule the engine follows) ------------------------
    def reserved_bytes(self, n_tasks):
        """Bytes set aside for all but the cells: per user 17 (and 24 of counters on the disconnected
        graph) at nine eighths of the users, the tail, the complete graph's counters, 64."""
        disconnected = self.graph.kind == "disconnected"
        per_user = 17 + (24 if disconnected else 0)
        tail = 4 << self.tail_bits if self.tail_bits is not None else 0
        return (n_tasks + n_tasks // 8) * per_user + tail + (0 if disconnected else 24) + 64

    def record_limit(self, n_tasks):
        """The most cells the budget holds: what is left after the reserve, 32 + 4 x stride bytes each."""
        stride = {"normalized": 3, "adagrad": 2, "arow": 2, "sgd": 1}[self.rule]
        return max(0, self.max_bytes - self.reserved_bytes(n_tasks)) // (32 + 4 * stride)

    def evict(self, task, fold):
        """Removes the user's own cells, adding their weights into the tail (``fold``, with a tail)."""
        cells = [c for c in self.W if c[0] == task]
        if fold and self.tail is not None and cells:
            n = len(self.tail)
            for cell in cells:
                slot = slot_of(cell[1], task, n)
                self.tail[slot] = np.float32(self.tail[slot] + np.float32(self.W[cell]))
            self.folded.add(task)
        for cell in cells:
            for stat in (self.W, self.G, self.N):
                stat.pop(cell, None)
        self.residents.pop(task, None)

    def make_room(self, task, needed):
        """Evicts the least recently active users (not ``task``) while ``needed`` more cells would
        pass the limit."""
        limit = self.record_limit(self.graph.n_tasks)
        kept = sum(1 for r, _ in self.W if r in (task, SHARED))
        if kept + needed > limit:
            raise ValueError(f"max_bytes: {self.max_bytes} bytes hold {limit} cells, not this example's {needed} new cells")
        while len(self.W) + needed > limit:
            victim = next(t for t in self.residents if t != task)
            self.evict(victim, fold=True)
            self.n_evicted += 1

    def tail_score(self, x, task):
        if self.tail is None or task not in self.folded:
            return 0.0
        n, own = len(self.tail), next(b for r, b in self.terms[task] if r != SHARED)
        keys = [(j, v) for j, v in enumerate(x) if v != 0.0] + ([(self.d, 1.0)] if self.intercept else [])
        return own * sum(v * float(self.tail[slot_of(j, task, n)]) for j, v in keys)

    def forget(self, tasks):
        """The tasks' own cells and, on the disconnected graph, their counters go (the shared
        block, and under hashing the table, keep them)."""
        if self.graph.kind not in ("disconnected", "complete_open", "complete"):
            raise ValueError("MTLinear on a general task graph cannot forget a task")
        if self.graph.kind != "disconnected" and self.graph.n_tasks == 1:
            raise ValueError("a one-task complete graph keeps one block, its shared block")
        for t in tasks:
            if self.graph.kind == "disconnected":
                self.t[t] = self.n_norm[t] = self.sum_norm_x[t] = 0.0
            if self.bits is None:
                self.evict(t, fold=False)
                self.folded.discard(t)
        return 0

    @property
    def n_active(self) -> int:
        return self.n_updates

    def grow_tasks(self, n: int) -> None:
        """As the engine (docs/mt_linear.md, M.1 and open-ended task sets): new tasks get empty
        own blocks; the complete graph's shared block keeps its id."""
        k = self.graph.n_tasks
        complete = self.graph.kind == "complete_open"
        if self.graph.kind not in ("disconnected", "complete_open"):
            raise ValueError(f"a fitted model on a {self.graph.kind!r} task graph cannot add tasks")
        if complete and k == 1 and self.W:
            raise ValueError("MTLinear cannot add tasks to this fitted model: a one-task complete graph keeps one block")
        graph = self.graph.add_tasks(n)
        if self.max_bytes is not None:
            limit = self.record_limit(graph.n_tasks)
            if sum(1 for r, _ in self.W if r == SHARED) > limit or self.reserved_bytes(graph.n_tasks) >= self.max_bytes:
                raise ValueError(f"max_bytes: {self.max_bytes} bytes cannot hold the state of {graph.n_tasks} users")
            while len(self.W) > limit and self.residents:
                self.evict(next(iter(self.residents)), fold=True)
                self.n_evicted += 1
        if not complete:
            self.t, self.n_norm, self.sum_norm_x = (np.concatenate([a, np.zeros(n)]) for a in (self.t, self.n_norm, self.sum_norm_x))
        self.terms, _ = factor_terms(graph)
        self.comp, self.graph = components_of(graph, graph.n_tasks), graph

    def n_blocks(self):
        k = self.graph.n_tasks
        return k + 1 if self.graph.kind in ("complete", "complete_open") and k >= 2 else k

    def width(self):
        return 2**self.bits if self.bits is not None else self.d + int(self.intercept)

    def diagnostics(self) -> dict:
        return {"n_blocks": float(self.n_blocks()), "block_width": float(self.width()),
                "n_evicted_users": float(self.n_evicted), "n_resident_users": float(len(self.residents))}

    def arrays(self) -> dict:
        if self.bits is not None:
            table = np.zeros(self.width(), dtype=np.float32)
            for slot, w in self.W.items():
                table[slot] = w
            return {"table_weights": table.astype(np.float64)} if self.W else {}
        k, width = self.graph.n_tasks, self.width()
        out = np.zeros((self.n_blocks(), width), dtype=np.float32)
        for (r, j), w in self.W.items():
            out[k if r == SHARED else r, j] = w
        return {"block_weights": out.astype(np.float64)}

    def entries(self, x, block):
        """(cell, value) of every coordinate of (x, 1) in ``block``: without hashing the cell is
        (block, feature) (the intercept's feature is d); under hashing, the table cell of the
        feature index (the intercept's key is 2^64 - 1) hashed with the block as seed."""
        out = [(j, v) for j, v in enumerate(x) if v != 0.0]
        if self.bits is None:
            if self.intercept:
                out.append((self.d, 1.0))
            return [((block, j), v) for j, v in out]
        if self.intercept:
            out.append((INTERCEPT_KEY, 1.0))
        return [(slot_of(key, block, 2**self.bits), v) for key, v in out]

    def shared_block(self):
        """The complete graph's shared block (k >= 2), whose rates shared_rate multiplies; None
        for every other graph."""
        k = self.graph.n_tasks
        return SHARED if self.graph.kind in ("complete", "complete_open") and k >= 2 else None

    def score_one(self, x, task):
        s = sum(b * sum(v * float(self.W.get(cell, 0.0)) for cell, v in self.entries(x, r)) for r, b in self.terms[task])
        return s + self.tail_score(x, task) if self.max_bytes is not None else s

    def update_one(self, x, task, y, p):
        self.learn_coords(x, task, y, p)
        if task in self.residents:
            self.residents.move_to_end(task)  # the most recently active user

    def learn_coords(self, x, task, y, p):
        c = self.comp[task]
        self.t[c] += 1
        g = loss_derivative(self.loss, y, p)
        # |g| < 1.5e-154 (g^2 underflows): nothing to learn in double precision (as the engine).
        if loss_value(self.loss, y, p) <= 0 or g * g < sys.float_info.min:
            return
        coords = [(r, cell, b * v) for r, b in self.terms[task] for cell, v in self.entries(x, r) if b * v != 0.0]
        W, Gs, Ns = self.W, self.G, self.N
        rates, h, norm_x = [], 0.0, 0.0
        # AROW's second statistic is D = sum u^2 (its precision 1 + eta D), the others' G = sum g^2 u^2.
        g2 = 1.0 if self.rule == "arow" else g * g
        for r, j, u in coords:
            G = float(Gs.get(j, 0.0)) + g2 * u * u
            if self.rule == "normalized":
                N = max(float(Ns.get(j, 0.0)), abs(u))
                norm_x += u * u / (N * N)
                rate = 1.0 / (math.sqrt(G) * N)
            elif self.rule == "adagrad":
                rate = 1.0 / math.sqrt(G)
            elif self.rule == "arow":
                rate = 1.0 / (1.0 + self.eta * float(Gs.get(j, 0.0)))  # the variance before this update
            else:
                rate = 1.0 / math.sqrt(self.t[c])
            if r == self.shared_block():
                rate *= self.rho  # M.8: the shared block's rates (AROW: variances) times rho
            rates.append(rate)
            h += u * u * rate
        mult = 1.0
        if self.rule == "normalized":
            mult = math.sqrt((self.n_norm[c] + 1) / (self.sum_norm_x[c] + norm_x))
        h *= mult
        if h == 0:
            return
        if self.rule == "arow":
            s = proximal_step(self.loss, y, p, self.eta, h)
        else:
            s = invariant_step(self.loss, y, p, self.eta, h) * mult
        if not (math.isfinite(h) and math.isfinite(s) and all(map(math.isfinite, rates))):
            raise ValueError("MTLinear: non-finite step; update refused")
        # Every value written must fit f32, with room for coordinates colliding in one slot.
        f32_max = float(np.finfo(np.float32).max)
        old_w = max((abs(float(W.get(j, 0.0))) for _, j, _ in coords), default=0.0)
        old_g = max((float(Gs.get(j, 0.0)) for _, j, _ in coords), default=0.0)
        bounds = (old_w + abs(s) * sum(abs(u * rate) for (_, _, u), rate in zip(coords, rates)),
                  old_g + g2 * sum(u * u for _, _, u in coords), max(abs(u) for _, _, u in coords))
        if not all(b < f32_max for b in bounds):
            raise ValueError("MTLinear: a weight or statistic would exceed single precision; update refused")
        if self.max_bytes is not None:
            new = {j for _, j, _ in coords if j not in W}
            if new:
                self.make_room(task, len(new))
                if any(j[0] == task for j in new):
                    self.residents[task] = None
        f32 = np.float32
        for (_, j, u), rate in zip(coords, rates):
            w = float(W.get(j, 0.0))
            Gs[j] = f32(float(Gs.get(j, 0.0)) + g2 * u * u)
            n_old = float(Ns.get(j, 0.0))
            if self.rule == "normalized" and abs(u) > n_old:
                if n_old > 0:
                    w *= n_old / abs(u)
                Ns[j] = f32(abs(u))
            W[j] = f32(w + s * u * rate)
        self.n_norm[c] += 1
        self.sum_norm_x[c] += norm_x
        self.n_updates += 1


class MTLinear(learners.MTLinear):
    __doc__ = "Reference twin of ``omtl.MTLinear`` (NumPy)."

    def _make_core(self, n_features, sparse):
        return MTLinearCore(self._task_graph(), n_features, **self._validated_params())
