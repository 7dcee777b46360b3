package main

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/fcsp-go/fcsp-go/fcsp"
)

// How fast a layout reacts to a burst, as the storm measures it from its
// own requests and from the pool's own account of each SM move: per burst,
// the time from its first request until its P99 is back within a target;
// per move of the controller, what it took and how long its growth waited
// for the work queued on the SMs it took.

// reqRec is one request of a burst phase: its start, since the first
// phase, and its time.
type reqRec struct {
	at time.Duration
	us float64
}

// headWindow is a burst's head, from its first request: its growth and
// the hand-over (a kernel or two of the batch's) with room to spare.
const headWindow = 10 * time.Millisecond

// headTimes appends to dst the times (µs) of the requests of r, a burst's
// sorted by start, that started within headWindow of its first.
func headTimes(dst []float64, r []reqRec) []float64 {
	for _, q := range r {
		if q.at-r[0].at >= headWindow {
			break
		}
		dst = append(dst, q.us)
	}
	return dst
}

// burstReqs is burst c's requests (those that started in its phase) of
// reqs, which are sorted by start.
func burstReqs(reqs []reqRec, b burstCfg, c int) []reqRec {
	from, to := time.Duration(c)*b.period()+b.quiet, time.Duration(c+1)*b.period()
	i := sort.Search(len(reqs), func(i int) bool { return reqs[i].at >= from })
	j := sort.Search(len(reqs), func(i int) bool { return reqs[i].at >= to })
	return reqs[i:j]
}

// recoverySinceFirst is the time, in ms, from a burst's first request
// until the P99 of its requests since then is back within target (µs) for
// good: from then to the end of its last request it stays within. A
// request still running counts with the time it has run so far, so that
// one already over target counts as over before it ends. 0: never over;
// -1: over at the end. r is the burst's requests, sorted by start, at
// least one.
//
// The P99 of n requests (nearest rank, as pct) is within target while at
// most n-1-idx(n) of them are over it: at most none up to 100 requests,
// one up to 200, and so on. The count over target changes only when a
// request starts (n grows) and when a slow one passes target (over grows),
// so those are the only times to look at.
func recoverySinceFirst(r []reqRec, target float64) float64 {
	type event struct {
		at   time.Duration
		over bool // a slow request passes target; else one starts
	}
	ev := make([]event, 0, len(r)+len(r)/8)
	tgt := time.Duration(target * 1e3)
	for _, q := range r {
		ev = append(ev, event{at: q.at})
		if q.us > target {
			ev = append(ev, event{at: q.at + tgt, over: true})
		}
	}
	slices.SortStableFunc(ev, func(a, b event) int { return cmp.Compare(a.at, b.at) })
	n, over := 0, 0
	var back time.Duration // when it was last back within (valid while ok)
	ok, wasOver := true, false
	for i := 0; i < len(ev); {
		at := ev[i].at
		for ; i < len(ev) && ev[i].at == at; i++ {
			if ev[i].over {
				over++
			} else {
				n++
			}
		}
		idx := min(n-1, int(0.99*float64(n)))
		now := over <= n-1-idx
		if now && !ok {
			back = at
		}
		wasOver = wasOver || !now
		ok = now
	}
	switch {
	case !ok:
		return -1
	case !wasOver:
		return 0
	}
	return ms(back - r[0].at)
}

// recoveryWindow is the time, in ms, from a burst's first request to the
// start of the first 10 ms window (1 ms steps, inside the burst's phase,
// which ends at end) of its requests whose P99 is within target (µs), of
// windows with at least 10 requests; -1: none.
func recoveryWindow(r []reqRec, end time.Duration, target float64) float64 {
	const w = 10 * time.Millisecond
	if len(r) == 0 {
		return -1
	}
	first := r[0].at
	var win []float64
	for off := time.Duration(0); first+off+w <= end; off += time.Millisecond {
		from, to := first+off, first+off+w
		i := sort.Search(len(r), func(i int) bool { return r[i].at >= from })
		j := sort.Search(len(r), func(i int) bool { return r[i].at >= to })
		if j-i < 10 {
			continue
		}
		win = win[:0]
		for _, q := range r[i:j] {
			win = append(win, q.us)
		}
		slices.Sort(win)
		if pct(win, 0.99) <= target {
			return ms(off)
		}
	}
	return -1
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// recoveryStats is the largest and the median of per-burst recoveries in
// ms, -1 (never) counted as the largest, and how many never were.
func recoveryStats(v []float64) (worst, med float64, never int) {
	if len(v) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(v)
	for i, x := range s {
		if x < 0 {
			s[i], never = math.Inf(1), never+1
		}
	}
	slices.Sort(s)
	worst, med = s[len(s)-1], s[len(s)/2]
	if math.IsInf(worst, 1) {
		worst = -1
	}
	if math.IsInf(med, 1) {
		med = -1
	}
	return worst, med, never
}

// writeReqs and readReqs carry the mps layout's interactive process's
// burst requests to the parent, which computes their recoveries once
// every layout ran: 16 bytes a request, little-endian.
func writeReqs(path string, reqs []reqRec) error {
	buf := make([]byte, 0, 16*len(reqs))
	for _, q := range reqs {
		buf = binary.LittleEndian.AppendUint64(buf, uint64(q.at))
		buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(q.us))
	}
	return os.WriteFile(path, buf, 0o644)
}

func readReqs(path string) ([]reqRec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b)%16 != 0 {
		return nil, fmt.Errorf("%s: %d bytes, not a whole number of 16-byte requests", path, len(b))
	}
	out := make([]reqRec, 0, len(b)/16)
	for ; len(b) > 0; b = b[16:] {
		out = append(out, reqRec{time.Duration(binary.LittleEndian.Uint64(b)), math.Float64frombits(binary.LittleEndian.Uint64(b[8:]))})
	}
	return out, nil
}

// MoveRow is one move of the controller, from the pool's debug lines:
// "SMs moved" (or "SM move refused") and the "tenant reshaped" line of the
// tenant that grew in it, whose handoff_wait is the growth's wait for the
// work queued on the SMs it took.
type MoveRow struct {
	AtMs          float64 `json:"at_ms"` // the decision, ms since the first phase
	From          int     `json:"from_sms"`
	To            int     `json:"sms"`
	Kind          string  `json:"kind"`
	TookMs        float64 `json:"took_ms"`                 // from the decision to the new SMs serving
	HandoffWaitMs float64 `json:"handoff_wait_ms"`         // the growing tenant's wait for the work queued on the SMs it took
	CallsWaitMs   float64 `json:"calls_wait_ms"`           // its wait for its own calls in flight, before the switch
	Refused       string  `json:"refused,omitempty"`       // why, where the move was refused
	Grower        string  `json:"grower_tenant,omitempty"` // the tenant that grew: the latency class, or the rest after a shrink
}

// Grows says whether the move grew the latency class (the growth a burst
// waits for).
func (m MoveRow) Grows() bool { return m.To > m.From && m.Refused == "" }

// moveTap reads the pool's debug lines of SM moves as they are logged:
// the pool's logger (WithLogger) is its only account of a move's parts.
type moveTap struct {
	lat string // the latency class's tenant name

	mu       sync.Mutex
	reshaped map[string]reshapeLine // the last "tenant reshaped" line of each tenant
	moves    []tapped
}

type reshapeLine struct{ handoff, calls time.Duration }

type tapped struct {
	at  time.Time // the decision
	row MoveRow
}

func newMoveTap(lat string) *moveTap {
	return &moveTap{lat: lat, reshaped: map[string]reshapeLine{}}
}

// wrap is opener.tap: the pool's handler, with the move lines read on the
// way (and asked for at debug level, whatever inner keeps).
func (t *moveTap) wrap(inner slog.Handler) slog.Handler { return tapHandler{inner, t} }

type tapHandler struct {
	inner slog.Handler
	tap   *moveTap
}

func (h tapHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelDebug || h.inner.Enabled(ctx, l)
}

func (h tapHandler) Handle(ctx context.Context, r slog.Record) error {
	h.tap.take(r)
	if h.inner.Enabled(ctx, r.Level) {
		return h.inner.Handle(ctx, r)
	}
	return nil
}

func (h tapHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return tapHandler{h.inner.WithAttrs(as), h.tap}
}

func (h tapHandler) WithGroup(name string) slog.Handler {
	return tapHandler{h.inner.WithGroup(name), h.tap}
}

func (t *moveTap) take(r slog.Record) {
	switch r.Message {
	case "tenant reshaped", "SMs moved", "SM move refused":
	default:
		return
	}
	a := map[string]slog.Value{}
	r.Attrs(func(x slog.Attr) bool {
		a[x.Key] = x.Value.Resolve()
		return true
	})
	dur := func(k string) time.Duration {
		if v, ok := a[k]; ok && v.Kind() == slog.KindDuration {
			return v.Duration()
		}
		return 0
	}
	num := func(k string) int {
		if v, ok := a[k]; ok && v.Kind() == slog.KindInt64 {
			return int(v.Int64())
		}
		return 0
	}
	str := func(k string) string {
		if v, ok := a[k]; ok {
			return v.String()
		}
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if r.Message == "tenant reshaped" {
		t.reshaped[str("tenant")] = reshapeLine{dur("handoff_wait"), dur("calls_wait")}
		return
	}
	took := dur("took")
	m := MoveRow{From: num("from_sms"), To: num("sms"), Kind: str("kind"), TookMs: ms(took)}
	if r.Message == "SM move refused" {
		m.Refused = str("err")
	} else {
		m.Grower = str("rest")
		if m.To > m.From {
			m.Grower = str("tenant")
		}
		if l, ok := t.reshaped[m.Grower]; ok {
			m.HandoffWaitMs, m.CallsWaitMs = ms(l.handoff), ms(l.calls)
			delete(t.reshaped, m.Grower)
		}
	}
	t.moves = append(t.moves, tapped{r.Time.Add(-took), m})
}

// rows is the moves decided from origin to end, their times since origin;
// those of the tenants' setup and the warm-up are left out.
func (t *moveTap) rows(origin, end time.Time) []MoveRow {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []MoveRow
	for _, m := range t.moves {
		if m.at.Before(origin) || m.at.After(end) {
			continue
		}
		m.row.AtMs = ms(m.at.Sub(origin))
		out = append(out, m.row)
	}
	return out
}

// HistRow is an fcsp.Histogram (Stats.SMMoveTime, Stats.BurstRecovery)
// as the report gives it: the count, the mean, and the bucket bounds at
// which the median and the P99 fall (-1: past the last bound, 1 s).
type HistRow struct {
	Count    uint64    `json:"count"`
	MeanMs   float64   `json:"mean_ms"`
	P50LeMs  float64   `json:"p50_le_ms"`
	P99LeMs  float64   `json:"p99_le_ms"`
	Le       []uint64  `json:"le"`
	BoundsMs []float64 `json:"bounds_ms"`
}

func histRow(h fcsp.Histogram) *HistRow {
	r := &HistRow{Count: h.Count, Le: slices.Clone(h.Le[:])}
	for _, b := range fcsp.MoveBounds {
		r.BoundsMs = append(r.BoundsMs, ms(b))
	}
	if h.Count > 0 {
		r.MeanMs = ms(h.Total / time.Duration(h.Count))
	}
	r.P50LeMs, r.P99LeMs = r.quantile(0.5), r.quantile(0.99)
	return r
}

// quantile is the bound of the first bucket that holds the nearest-rank
// q-quantile; -1 past the last.
func (r *HistRow) quantile(q float64) float64 {
	if r.Count == 0 {
		return 0
	}
	rank := uint64(max(1, math.Ceil(q*float64(r.Count))))
	for i, n := range r.Le {
		if n >= rank {
			return r.BoundsMs[i]
		}
	}
	return -1
}

// add sums histograms (the rounds of one layout).
func (r *HistRow) add(o *HistRow) *HistRow {
	if o == nil {
		return r
	}
	if r == nil {
		c := *o
		c.Le = slices.Clone(o.Le)
		return &c
	}
	mean := (r.MeanMs*float64(r.Count) + o.MeanMs*float64(o.Count)) / max(1, float64(r.Count+o.Count))
	r.Count += o.Count
	r.MeanMs = mean
	for i := range r.Le {
		r.Le[i] += o.Le[i]
	}
	r.P50LeMs, r.P99LeMs = r.quantile(0.5), r.quantile(0.99)
	return r
}
