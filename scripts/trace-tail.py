#!/usr/bin/env python3
"""Where a request goroutine's tail goes, from a storm trace (examples/storm -trace).

    go tool trace -d=parsed storm-all.trace > all.txt
    python3 scripts/trace-tail.py all.txt

Finds the goroutine with the most cuBLAS GEMM calls (an interactive request
goroutine at K=1), splits its time into requests (one GEMM call to the
next), and prints: the distribution of each cgo call it made and of its
time runnable (waiting for a P) and running Go code; the stops of the world
in the window; and the slowest requests, each with the stops it overlapped.
"""
import collections, re, sys

lines = open(sys.argv[1]).read().split('\n')
trans = []   # (time ns, goid, from, to, first frame of the transition stack)
stw = []     # (begin, end)
stw_open = None
for i, l in enumerate(lines):
    if not l.startswith('M='):
        continue
    if 'stop-the-world (GC' in l:
        t = int(re.search(r'Time=(\d+)', l).group(1))
        if 'RangeBegin' in l:
            stw_open = t
        elif stw_open is not None:
            stw.append((stw_open, t)); stw_open = None
        continue
    m = re.search(r'StateTransition Time=(\d+) GoID=(\d+) (\w+)->(\w+)', l)
    if not m:
        continue
    frame = ''
    if i + 2 < len(lines) and lines[i + 1].startswith('TransitionStack='):
        frame = lines[i + 2].strip().split(' @')[0].split('_Cfunc_')[-1]
    trans.append((int(m.group(1)), m.group(2), m.group(3), m.group(4), frame))

gemms = collections.Counter(g for t, g, a, b, f in trans if b == 'Syscall' and 'gemm' in f)
if not gemms:
    sys.exit('no goroutine made cuBLAS GEMM calls in this trace')
G = gemms.most_common(1)[0][0]
ev = [x for x in trans if x[1] == G]
print(f'request goroutine {G}: {gemms[G]} GEMM calls; {len(stw)} stops of the world in the window: '
      + ', '.join(f'{(b - a) / 1e3:.0f}' for a, b in stw) + ' us')

dist = collections.defaultdict(list)
for x, y in zip(ev, ev[1:]):
    key = x[4][:28] if x[3] == 'Syscall' else x[3]
    dist[key].append((y[0] - x[0]) / 1e3)
print(f'{"state or cgo call":30s} {"n":>6s} {"p50":>7s} {"p90":>7s} {"p99":>7s} {"p99.9":>7s} {"max":>7s}  (us)')
for k, v in sorted(dist.items(), key=lambda kv: -len(kv[1])):
    v.sort(); n = len(v)
    print(f'{k:30s} {n:6d} {v[n // 2]:7.1f} {v[int(n * .9)]:7.1f} {v[int(n * .99)]:7.1f} {v[min(n - 1, int(n * .999))]:7.1f} {v[-1]:7.1f}')

starts = [k for k, x in enumerate(ev) if x[3] == 'Syscall' and 'gemm' in x[4]]
reqs = []
for a, b in zip(starts, starts[1:]):
    t0, t1 = ev[a][0], ev[b][0]
    runnable = sum(y[0] - x[0] for x, y in zip(ev[a:b], ev[a + 1:b + 1]) if x[3] == 'Runnable')
    slowest = max(((y[0] - x[0], x[4][:20] if x[3] == 'Syscall' else x[3]) for x, y in zip(ev[a:b], ev[a + 1:b + 1])))
    hit = [(e - s) / 1e3 for s, e in stw if s < t1 and e > t0]
    reqs.append(((t1 - t0) / 1e3, runnable / 1e3, slowest, hit))
d = sorted(r[0] for r in reqs)
n = len(d)
print(f'requests (GEMM to GEMM) {n}: p50 {d[n // 2]:.1f} p99 {d[int(n * .99)]:.1f} max {d[-1]:.1f} us; '
      f'{sum(1 for r in reqs if r[3])} overlapped a stop of the world')
print('slowest 1%: us, of it runnable, its longest part, the stops it overlapped')
for r in sorted(reqs, reverse=True)[:max(1, n // 100)]:
    print(f'  {r[0]:7.1f} {r[1]:7.1f}  {r[2][1]} {r[2][0] / 1e3:.1f}  {r[3] or ""}')
