#!/usr/bin/env python3
"""The matrices of NOTES.md "SpMM steps 61-65" (which rows share B's rows; short rows in f16/bf16), written as
Matrix Market files into OUT.

usage: locality-matrices.py permuted SHARED_MATRICES OUT   real matrices permuted at random, 2D/3D stencils (s74)
       locality-matrices.py sweep OUT                      36 generated matrices the rule was fitted on (s75)
       locality-matrices.py validation OUT                 11 matrices the rule was checked on, not fitted (s76)
       locality-matrices.py fewer-rows OUT                 20 generated matrices of 8192 and 12288 rows (s78)
       locality-matrices.py fewer-rows-validation OUT      8 matrices of 9000-15000 rows, not fitted (s79)
       locality-matrices.py half-validation OUT            8 matrices of 18000-200000 rows for f16/bf16 (step 62, s82)
       locality-matrices.py half-fewer-rows-validation OUT 10 matrices of 8500-16000 rows for f16/bf16 (step 63, s89)
       locality-matrices.py few-rows OUT                   20 generated matrices of 4096 and 6144 rows (step 65, s91)
       locality-matrices.py few-rows-validation OUT        8 matrices of 4500-7900 rows, not fitted (step 65, s91)

Needs numpy. Each set draws from its own seeded generator, in the order below, so a set comes out the same every
time. `sweep` takes about 25 s, the others 10 s.
"""
import gzip
import sys
from collections import defaultdict

import numpy as np


def read(path):
    """(m, k, rows, cols) of a coordinate Matrix Market file, 0-based, a symmetric one expanded."""
    f = gzip.open(path, 'rt') if path.endswith('.gz') else open(path)
    symmetric = 'symmetric' in f.readline()
    line = f.readline()
    while line.startswith('%'):
        line = f.readline()
    m, k, _ = map(int, line.split())
    a = np.loadtxt(f, usecols=(0, 1), dtype=np.int64).reshape(-1, 2) - 1
    r, c = a[:, 0], a[:, 1]
    if symmetric:
        off = r != c
        r, c = np.concatenate([r, c[off]]), np.concatenate([c, r[off]])
    return m, k, r, c


def write(path, m, k, r, c, v, comment=None):
    """Rows sorted, columns sorted in each row; gzip when the name ends in .gz."""
    o = np.lexsort((c, r))
    r, c, v = r[o], c[o], v[o]
    f = gzip.open(path, 'wt', compresslevel=9) if path.endswith('.gz') else open(path, 'w')
    with f:
        f.write('%%MatrixMarket matrix coordinate real general\n')
        if comment:
            f.write(f'% {comment}\n')
        f.write(f'{m} {k} {len(r)}\n')
        f.write(''.join(f'{a} {b} {x:.7g}\n' for a, b, x in zip((r + 1).tolist(), (c + 1).tolist(), v.tolist())))
    print(path, m, k, len(r), flush=True)


def stencil(shape, offsets):
    """The pattern of a finite-difference stencil on a grid of `shape`, points numbered in row-major order."""
    idx = np.arange(np.prod(shape)).reshape(shape)
    rows, cols = [], []
    for d in offsets:
        a = tuple(slice(max(0, -e), s - max(0, e)) for e, s in zip(d, shape))
        b = tuple(slice(max(0, e), s - max(0, -e)) for e, s in zip(d, shape))
        rows.append(idx[a].ravel())
        cols.append(idx[b].ravel())
    return int(np.prod(shape)), np.concatenate(rows), np.concatenate(cols)


FIVE = [(0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)]
SEVEN = [(0, 0, 0), (1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1)]
NINE = [(i, j) for i in (-1, 0, 1) for j in (-1, 0, 1)]


def permuted_set(shared, out):
    rng = np.random.default_rng(20261128)
    for name in ['4elt', 'add32', 'case_ACTIVSg70k_ybus_im', 'copter2', 'email-Enron', 'lund_a', 'utm300', 'well1850',
                 'west0479', 'wrld_1deg']:
        m, k, r, c = read(f'{shared}/{name}.mtx.gz')
        v = rng.uniform(-1, 1, len(r))
        pr = rng.permutation(m)
        pc = pr if m == k else rng.permutation(k)
        write(f'{out}/{name}_perm.mtx.gz', m, k, pr[r], pc[c], v,
              f'{name} from ../shared/matrices, rows and columns permuted at random (seed 20261128), values uniform')
    for name, (m, r, c) in [('lap2d5_256', stencil((256, 256), FIVE)), ('lap3d7_40', stencil((40, 40, 40), SEVEN))]:
        v = rng.uniform(-1, 1, len(r))
        write(f'{out}/{name}.mtx.gz', m, m, r, c, v, f'{name}: a finite-difference stencil in natural order')
        pr = rng.permutation(m)
        write(f'{out}/{name}_perm.mtx.gz', m, m, pr[r], pr[c], v, f'{name} permuted at random')


def local_rows(rng, m, mean, dist, h):
    """m x m: rows of `mean` entries ('even': the mean rounded up or down at random; 'pois': 1 + Poisson(mean - 1)),
    columns drawn without replacement within h of the row's index (h None: anywhere)."""
    lens = np.floor(mean + rng.random(m)).astype(np.int64) if dist == 'even' else 1 + rng.poisson(mean - 1, m)
    lens = np.minimum(lens, m if h is None else 2 * h + 1)
    rows, cols = [], []
    for i in range(m):
        n = lens[i]
        if h is None:
            c = rng.choice(m, n, replace=False)
        else:
            lo, hi = max(0, i - h), min(m, i + h + 1)
            if hi - lo < n:
                lo, hi = max(0, hi - n), max(hi, lo + n)
            c = lo + rng.choice(hi - lo, n, replace=False)
        cols.append(np.sort(c))
        rows.append(np.full(n, i))
    return np.concatenate(rows), np.concatenate(cols)


def generated_set(out, prefix, seed, ms, groups, hs):
    """m x m for each m in `ms`, each (dist, means) in `groups` and each h in `hs`, seeds from `seed` + 1 in turn."""
    for m in ms:
        for dist, means in groups:
            for mean in means:
                for h in hs:
                    seed += 1
                    r, c = local_rows(np.random.default_rng(seed), m, mean, dist, h)
                    v = np.random.default_rng(seed).uniform(-1, 1, len(r))
                    write(f"{out}/{prefix}_{m}_{dist}{mean}_h{h if h else 'none'}.mtx", m, m, r, c, v)


def sweep_set(out):
    generated_set(out, 'loc', 750, [16384, 65536], [('even', [3, 5, 7, 10]), ('pois', [3.4, 7])], [32, 1024, None])


def fewer_rows_set(out):
    generated_set(out, 'few', 7800, [8192, 12288], [('even', [5, 7, 10]), ('pois', [3.4, 7])], [32, None])


def fewer_rows_validation_set(out):
    """m x k with k != m allowed: columns within h of the row's place scaled to k."""
    seed = 7900
    for m, k, mean, dist, h in [(10000, 10000, 4, 'even', 64), (14000, 14000, 6, 'even', None), (9000, 9000, 8, 'pois', 128),
                                (15000, 15000, 9, 'even', 16), (12000, 50000, 5, 'pois', None), (11000, 11000, 3, 'even', None),
                                (13000, 13000, 7, 'pois', None), (10000, 10000, 10, 'pois', 512)]:
        seed += 1
        rng = np.random.default_rng(seed)
        if k == m:
            r, c = local_rows(rng, m, mean, dist, h)
        else:
            r, c = local_rows(rng, m, mean, dist, None)
            c = (c * k) // m + rng.integers(0, k // m, len(c))
        write(f"{out}/fv_{m}x{k}_{dist}{mean}_h{h if h else 'none'}.mtx", m, k, r, c, rng.uniform(-1, 1, len(r)))


def validation_set(out):
    rng = np.random.default_rng(76076)

    def put(name, m, r, c):
        write(f'{out}/{name}.mtx', m, m, r, c, rng.uniform(-1, 1, len(r)))

    def permuted(m, r, c):
        p = rng.permutation(m)
        return p[r], p[c]

    for name, (m, r, c) in [('st2d9_256', stencil((256, 256), NINE)), ('st3d7_32', stencil((32, 32, 32), SEVEN)),
                            ('st3d7_48', stencil((48, 48, 48), SEVEN)), ('st2d5_362', stencil((362, 362), FIVE))]:
        put(name, m, r, c)
        if name in ('st2d9_256', 'st3d7_48'):
            put(name + '_perm', m, *permuted(m, r, c))
    # A random geometric graph: 100,000 points in the unit square, each joined to the points within a radius (rows of
    # about 8), numbered along 256 x 256 cells in row-major order; and the same graph numbered at random.
    n = 100000
    pts = rng.random((n, 2))
    cell = (pts * 256).astype(int)
    pts = pts[np.lexsort((cell[:, 0], cell[:, 1]))]
    rad = np.sqrt(7.0 / (np.pi * n))
    buckets = defaultdict(list)
    for i, (x, y) in enumerate((pts / rad).astype(int)):
        buckets[(x, y)].append(i)
    rows, cols = [], []
    for (x, y), members in buckets.items():
        near = np.array([j for dx in (-1, 0, 1) for dy in (-1, 0, 1) for j in buckets.get((x + dx, y + dy), [])])
        for i in members:
            js = near[np.hypot(*(pts[near] - pts[i]).T) <= rad]
            rows.append(np.full(len(js), i))
            cols.append(js)
    r, c = np.concatenate(rows), np.concatenate(cols)
    put('rgg_100k', n, r, c)
    put('rgg_100k_perm', n, *permuted(n, r, c))
    for m, mean, dist, h in [(32768, 8, 'pois', 256), (131072, 6, 'even', 64), (24576, 9, 'even', 4096)]:
        put(f'val_{m}_{dist}{mean}_h{h}', m, *local_rows(rng, m, mean, dist, h))


def rect_rows(out, prefix, seed, shapes):
    """For each (m, k, mean, dist, h) in `shapes`, seeds from `seed` + 1 in turn: `local_rows` of m rows, columns
    within h of the row's place scaled to k (h None: anywhere), written as PREFIX_MxK_DISTMEAN_hH.mtx."""
    for m, k, mean, dist, h in shapes:
        seed += 1
        rng = np.random.default_rng(seed)
        r, c = local_rows(rng, m, mean, dist, h)
        if k != m:
            c = np.minimum((c * k) // m + rng.integers(0, max(1, k // m), len(c)), k - 1)
            o = np.lexsort((c, r))
            keep = np.ones(len(r), bool)
            keep[1:] = (r[o][1:] != r[o][:-1]) | (c[o][1:] != c[o][:-1])
            r, c = r[o][keep], c[o][keep]
        write(f"{out}/{prefix}_{m}x{k}_{dist}{mean}_h{h if h else 'none'}.mtx", m, k, r, c, rng.uniform(-1, 1, len(r)))


def half_validation_set(out):
    """Step 62's fresh matrices for the f16/bf16 tiles in turn (`rect_rows`)."""
    rect_rows(out, 'hv', 8100, [(20000, 50000, 5, 'even', None), (100000, 12000, 4, 'pois', None),
                                (40000, 9000, 3, 'even', 64), (24000, 24000, 6.5, 'pois', 256),
                                (200000, 200000, 2.5, 'pois', None), (50000, 50000, 7, 'even', None),
                                (30000, 30000, 8, 'even', None), (18000, 18000, 7.5, 'pois', 32)])


def half_fewer_rows_validation_set(out):
    """Step 63's fresh matrices for the f16/bf16 tiles in turn in 8192-16383 rows: stencils in their own order (two
    also permuted at random) and m x k rows (`rect_rows`)."""
    rng = np.random.default_rng(8300)
    for name, (m, r, c) in [('st2d5_100', stencil((100, 100), FIVE)), ('st2d5_120', stencil((120, 120), FIVE)),
                            ('st3d7_22', stencil((22, 22, 22), SEVEN)), ('st3d7_24', stencil((24, 24, 24), SEVEN))]:
        write(f'{out}/hf_{name}.mtx', m, m, r, c, rng.uniform(-1, 1, len(r)))
        if name in ('st2d5_120', 'st3d7_22'):
            p = rng.permutation(m)
            write(f'{out}/hf_{name}_perm.mtx', m, m, p[r], p[c], rng.uniform(-1, 1, len(r)))
    rect_rows(out, 'hf', 8310, [(9000, 30000, 4, 'even', None), (16000, 16000, 6, 'pois', 128),
                                (12000, 60000, 3, 'pois', None), (8500, 8500, 7.5, 'even', None)])


def few_rows_set(out):
    generated_set(out, 'fr', 9100, [4096, 6144], [('even', [5, 8, 12]), ('pois', [4, 10])], [32, None])


def few_rows_validation_set(out):
    """Stencils of 4900-6400 points in their own order (one also permuted), and m x k rows (`rect_rows`)."""
    rng = np.random.default_rng(9200)
    for name, (m, r, c) in [('st2d5_70', stencil((70, 70), FIVE)), ('st2d9_75', stencil((75, 75), NINE)),
                            ('st3d7_18', stencil((18, 18, 18), SEVEN))]:
        write(f'{out}/frv_{name}.mtx', m, m, r, c, rng.uniform(-1, 1, len(r)))
        if name == 'st3d7_18':
            p = rng.permutation(m)
            write(f'{out}/frv_{name}_perm.mtx', m, m, p[r], p[c], rng.uniform(-1, 1, len(r)))
    rect_rows(out, 'frv', 9210, [(6000, 20000, 6, 'pois', None), (5000, 5000, 10, 'even', 64),
                                 (7900, 7900, 12, 'pois', None), (4500, 30000, 4, 'even', None)])


SETS = {'sweep': sweep_set, 'validation': validation_set, 'fewer-rows': fewer_rows_set,
        'fewer-rows-validation': fewer_rows_validation_set, 'half-validation': half_validation_set,
        'half-fewer-rows-validation': half_fewer_rows_validation_set, 'few-rows': few_rows_set,
        'few-rows-validation': few_rows_validation_set}

if __name__ == '__main__':
    if len(sys.argv) == 4 and sys.argv[1] == 'permuted':
        permuted_set(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] in SETS:
        SETS[sys.argv[1]](sys.argv[2])
    else:
        sys.exit(__doc__)
