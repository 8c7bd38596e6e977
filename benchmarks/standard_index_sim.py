"""Independent slots, enhanced double hashing modulo m, and the first index,
simulated in NumPy on a small filter (docs/design/layouts.md quotes it):

    python benchmarks/standard_index_sim.py M K N FILTERS ROUNDS   # e.g. 192 13 10 2000 50

Each of FILTERS filters gets N keys of K slots in M bits; 200 fresh keys a
round are probed. "ideal": K independent uniform slots; "edh": Dillinger and
Manolios' enhanced double hashing with x and y reduced mod M; "legacy": the
first index (64-bit enhanced double hashing, each g_i mapped by
multiply-shift, here from its top 53 bits)."""
import numpy as np
import sys
rng = np.random.default_rng(12345)
def slots_edh(x, y, m, k):
    out = [x.copy()]
    for i in range(1, k):
        x = (x + y) % m; y = (y + i) % m; out.append(x.copy())
    return np.stack(out, -1)
def slots_legacy(h1, h2, m, k):
    # 64-bit arithmetic, mul_hi via float approx of high bits (fine for m << 2^53)
    out = []; x = h1.copy(); y = h2.copy()
    def mh(v): return ((v >> np.uint64(11)).astype(np.float64) * (m / 2.0**53)).astype(np.int64)
    out.append(mh(x))
    for i in range(1, k):
        x = x + y; y = y + np.uint64(i); out.append(mh(x))
    return np.stack(out, -1)
def ideal(F, N, m, k): return rng.integers(0, m, size=(F, N, k))
def run(kind, m, k, n, F, P):
    def draw(N):
        if kind == 'ideal': return ideal(F, N, m, k)
        if kind == 'edh': return slots_edh(rng.integers(0, m, size=(F, N)), rng.integers(0, m, size=(F, N)), m, k)
        return slots_legacy(rng.integers(0, 2**63, size=(F, N), dtype=np.uint64)*np.uint64(2)+rng.integers(0,2,size=(F,N),dtype=np.uint64),
                            rng.integers(0, 2**63, size=(F, N), dtype=np.uint64)*np.uint64(2)+rng.integers(0,2,size=(F,N),dtype=np.uint64), m, k)
    ins = draw(n)
    bits = np.zeros((F, m), bool)
    fi = np.repeat(np.arange(F), n * k)
    bits[fi, ins.reshape(-1)] = True
    hits = 0
    for _ in range(P):
        pr = draw(200)
        hits += bits[np.arange(F)[:, None, None], pr].all(-1).sum()
    return hits / (F * 200 * P)
m, k, n = map(int, sys.argv[1:4]); F = int(sys.argv[4]); P = int(sys.argv[5])
for kind in ('ideal', 'edh', 'legacy'):
    print(kind, run(kind, m, k, n, F, P), flush=True)
