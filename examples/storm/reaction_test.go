package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fcsp-go/fcsp-go/fcsp"
)

// recoveryBrute is recoverySinceFirst the slow way: the P99 (as pct) of
// the requests started by each request's start and each slow one's
// passing of target, with those still running counted with the time they
// have run, and the last time it went from over to within target.
func recoveryBrute(r []reqRec, target float64) float64 {
	var times []time.Duration
	for _, q := range r {
		times = append(times, q.at, q.at+time.Duration(target*1e3))
	}
	slices.Sort(times)
	times = slices.Compact(times)
	ok, wasOver := true, false
	var back time.Duration
	for _, t := range times {
		var v []float64
		for _, q := range r {
			if q.at > t {
				continue
			}
			ran := float64((t - q.at).Nanoseconds()) / 1e3
			if q.us > target && ran >= target {
				v = append(v, q.us) // over target by now (it passed it at q.at+target)
			} else {
				v = append(v, min(q.us, target)) // within target so far
			}
		}
		slices.Sort(v)
		now := pct(v, 0.99) <= target
		if now && !ok {
			back = t
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

// A burst's recovery since its first request: 0 where no request went
// over, -1 where the P99 is over at the end, else the time the P99 of the
// requests since the first got back within target for good; the same as
// the slow way on random bursts.
func TestRecoverySinceFirst(t *testing.T) {
	at := func(us int) time.Duration { return time.Duration(us) * time.Microsecond }
	fast := []reqRec{{at(0), 100}, {at(10), 200}, {at(20), 300}}
	if got := recoverySinceFirst(fast, 400); got != 0 {
		t.Errorf("no request over target: recovery %v, want 0", got)
	}
	// Five slow requests at the start (1 ms each, target 400 us), then
	// fast ones 10 us apart from 5 ms on: the P99 of n requests allows
	// n-1-int(0.99n) over, five from n = 501 (496 fast ones, the last
	// starting at 5 ms + 495 x 10 us).
	var r []reqRec
	for i := range 5 {
		r = append(r, reqRec{at(i), 1000})
	}
	for i := range 1000 {
		r = append(r, reqRec{at(5000 + 10*i), 100})
	}
	if got := recoverySinceFirst(r, 400); got != 9.95 {
		t.Errorf("five slow, then fast: recovery %v ms, want 9.95", got)
	}
	if got := recoverySinceFirst(r[:400], 400); got != -1 {
		t.Errorf("five slow in 400: recovery %v, want -1 (never)", got)
	}
	// A slow request late in the burst takes it over again: the recovery
	// is the last time it came back.
	late := slices.Clone(r[:5+600])
	late = append(late, reqRec{at(20000), 5000}, reqRec{at(20001), 5000})
	for i := range 400 {
		late = append(late, reqRec{at(21000 + 10*i), 100})
	}
	if got, want := recoverySinceFirst(late, 400), recoveryBrute(late, 400); got != want || got <= 20 {
		t.Errorf("a late pair of slow requests: recovery %v ms, the slow way %v, want after 20 ms", got, want)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := map[string]int{}
	for n := range 100 {
		var r []reqRec
		t0, slowStart := 0, rng.IntN(3) // 0: no slow request at the start
		for range 20 + rng.IntN(200) {
			t0 += rng.IntN(30)
			d := 50 + rng.Float64()*300
			if rng.IntN(300) == 0 || t0 < 20*slowStart && rng.IntN(2) == 0 {
				d = 500 + rng.Float64()*2000
			}
			r = append(r, reqRec{at(t0), d})
		}
		got, want := recoverySinceFirst(r, 400), recoveryBrute(r, 400)
		if got != want {
			t.Fatalf("random burst %d (%d requests): recovery %v, the slow way %v", n, len(r), got, want)
		}
		switch {
		case got < 0:
			kinds["never"]++
		case got == 0:
			kinds["none over"]++
		default:
			kinds["recovered"]++
		}
	}
	if len(kinds) != 3 {
		t.Errorf("random bursts: %v; want some of each kind", kinds)
	}
}

// The 10 ms windows: the first one, from the burst's first request, whose
// P99 is within target; windows of fewer than 10 requests do not count.
func TestRecoveryWindow(t *testing.T) {
	ms1 := func(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }
	var r []reqRec
	for i := range 400 { // 40 ms of requests, 0.1 ms apart; slow for the first 3 ms
		d := 100.0
		if i < 30 {
			d = 900
		}
		r = append(r, reqRec{ms1(1 + 0.1*float64(i)), d})
	}
	if got := recoveryWindow(r, ms1(100), 400); got != 3 {
		t.Errorf("recovery %v ms, want 3 (the window from 3 ms on)", got)
	}
	if got := recoveryWindow(r[:35], ms1(100), 400); got != -1 {
		t.Errorf("too few requests after the slow ones: %v, want -1", got)
	}
	if got := recoveryWindow(r, ms1(12), 400); got != -1 {
		t.Errorf("the phase ends before a window within target: %v, want -1", got)
	}
	if w, m, n := recoveryStats([]float64{3, -1, 1, 2}); w != -1 || m != 3 || n != 1 {
		t.Errorf("recoveryStats: worst %v, median %v, never %d; want -1, 3, 1", w, m, n)
	}
}

// The mps layout's interactive process hands its requests over in a file.
func TestReqsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.bin")
	want := []reqRec{{3 * time.Millisecond, 250.5}, {time.Second, 1e6}}
	if err := writeReqs(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := readReqs(path)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("read %v, %v; want %v", got, err, want)
	}
	if err := os.WriteFile(path, []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readReqs(path); err == nil {
		t.Fatal("a torn file read without an error")
	}
}

// The tap reads each move from the pool's debug lines whatever level the
// program's own handler keeps, passes on what that handler keeps, and
// joins a move to the Reshape line of the tenant that grew in it.
func TestMoveTap(t *testing.T) {
	var text bytes.Buffer
	tap := newMoveTap("interactive")
	log := slog.New(tap.wrap(slog.NewTextHandler(&text, &slog.HandlerOptions{Level: slog.LevelWarn})))
	origin := time.Now().Add(-10 * time.Millisecond) // before every decision (a line's time less its took)
	log.Debug("tenant reshaped", "tenant", "batch", "from_sms", 116, "sms", 84, "took", time.Millisecond, "handoff_wait", time.Duration(0), "calls_wait", time.Millisecond)
	log.Debug("tenant reshaped", "tenant", "interactive", "from_sms", 16, "sms", 48, "took", 2*time.Millisecond,
		"handoff_wait", 1500*time.Microsecond, "calls_wait", 100*time.Microsecond)
	log.Debug("SMs moved", "tenant", "interactive", "from_sms", 16, "sms", 48, "rest", "batch", "rest_sms", 84, "kind", "grow_load", "reason", "grow", "took", 3*time.Millisecond)
	log.Debug("tenant reshaped", "tenant", "interactive", "from_sms", 48, "sms", 16, "took", time.Millisecond, "handoff_wait", time.Duration(0), "calls_wait", time.Millisecond)
	log.Debug("tenant reshaped", "tenant", "batch", "from_sms", 84, "sms", 116, "took", time.Millisecond, "handoff_wait", 20*time.Microsecond, "calls_wait", 0)
	log.Debug("SMs moved", "tenant", "interactive", "from_sms", 48, "sms", 16, "rest", "batch", "rest_sms", 116, "kind", "shrink", "reason", "shrink", "took", 2*time.Millisecond)
	log.Debug("SM move refused", "tenant", "interactive", "from_sms", 16, "sms", 24, "rest", "batch", "rest_sms", 116, "kind", "grow_p99", "reason", "r", "took", time.Millisecond, "err", "busy")
	log.Warn("kept")
	rows := tap.rows(origin, time.Now())
	if len(rows) != 3 {
		t.Fatalf("%d moves, want 3: %+v", len(rows), rows)
	}
	g, s, x := rows[0], rows[1], rows[2]
	if !g.Grows() || g.From != 16 || g.To != 48 || g.Kind != "grow_load" || g.TookMs != 3 || g.HandoffWaitMs != 1.5 || g.CallsWaitMs != 0.1 || g.Grower != "interactive" || g.AtMs <= 0 {
		t.Errorf("growth %+v", g)
	}
	if s.Grows() || s.Grower != "batch" || s.HandoffWaitMs != 0.02 {
		t.Errorf("shrink %+v: the rest grew, waiting 0.02 ms", s)
	}
	if x.Grows() || x.Refused != "busy" {
		t.Errorf("refusal %+v", x)
	}
	if w := growthWaits(rows); !slices.Equal(w, []float64{1.5}) {
		t.Errorf("growth waits %v, want [1.5]", w)
	}
	if got := text.String(); !strings.Contains(got, "msg=kept") || strings.Contains(got, "DEBUG") {
		t.Errorf("the program's handler got %q: want its warning alone", got)
	}
	if n := len(tap.rows(time.Now().Add(time.Hour), time.Now().Add(2*time.Hour))); n != 0 {
		t.Errorf("%d moves outside the window", n)
	}
}

// Stats' histograms as the report gives them: the bucket bounds where
// the median and the P99 fall, summed over rounds.
func TestHistRow(t *testing.T) {
	var h fcsp.Histogram
	for _, d := range []time.Duration{200 * time.Microsecond, 3 * time.Millisecond, 4 * time.Millisecond, 2 * time.Second} {
		h.Count++
		h.Total += d
		for i, b := range fcsp.MoveBounds {
			if d <= b {
				h.Le[i]++
			}
		}
	}
	r := histRow(h)
	if r.Count != 4 || r.P50LeMs != 5 || r.P99LeMs != -1 || len(r.BoundsMs) != 12 || r.BoundsMs[0] != 0.1 {
		t.Fatalf("%+v: want the median in the 5 ms bucket, the P99 past 1 s", r)
	}
	var sum *HistRow
	sum = sum.add(r).add(histRow(fcsp.Histogram{Count: 4, Total: 4 * time.Millisecond, Le: [12]uint64{4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}}))
	if sum.Count != 8 || sum.P99LeMs != -1 || sum.P50LeMs != 0.1 || sum.Le[0] != 4 || r.Le[0] != 0 {
		t.Fatalf("sum %+v (the first %+v left alone)", sum, r)
	}
}

// Every layout of the must-show in one run on the simulator: the steer
// variants, the batch alone with and without the bound, MPS as child
// processes; the reaction table, each burst's recovery against 1.2x
// split48's burst P99, each growth's wait, Stats' histograms, and the
// must-show checks, reported (n/a) and in the JSON; the chart's marks.
func TestBurstReactionOnSimulator(t *testing.T) {
	dir := t.TempDir()
	js, svg := filepath.Join(dir, "burst.json"), filepath.Join(dir, "burst.svg")
	var out, errw bytes.Buffer
	layouts := []string{"split16", "split48", "steer", "steer-nobound", "steer-rel", "steer-idle", "steer-idle-nobound", "mps"}
	args := []string{"-simulate", "-burst", "150ms/100ms", "-cycles", "2", "-rounds", "1", "-warmup", "20ms",
		"-burst-layouts", strings.Join(layouts, ","), "-mps-start=", "-mps-stop=", "-json", js, "-chart", svg}
	if err := run(context.Background(), args, &out, &errw); err != nil {
		t.Fatalf("%v\n%s\n%s", err, out.String(), errw.String())
	}
	s := out.String()
	for _, want := range []string{"### Reaction", "| steer-rel |", "| steer-idle-nobound |", "Must-show checks (300 ms / 100 ms bounds",
		"n/a steer burst P99 <= 1.2x split48's", "n/a steer batch >= 88% of split16's",
		"n/a steer: a growth's wait for queued work (P99 over the run's moves) <= the batch class's own kernel time",
		"n/a steer-rel: every burst's P99 over a 10 ms window back under 1.2x split48's burst P99",
		"n/a the batch class alone (steer-idle, bound on) >= 98% of its throughput without the bound", "Per burst", "- round 1 steer-idle: no requests"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "\nFAIL ") || strings.Contains(s, "\nPASS ") {
		t.Errorf("checks judged on the simulator:\n%s", s)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep loadModes
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	br := rep.BurstReport
	if len(rep.Bursts) != len(layouts) || br == nil || len(br.Layouts) != len(layouts) || len(br.Checks) != 5 {
		t.Fatalf("%d rows, report %+v: want a row and a summary per layout and 5 must-show checks", len(rep.Bursts), br)
	}
	var p48 float64
	for _, r := range rep.Bursts {
		if r.Layout == "split48" {
			p48 = r.BurstP99
		}
	}
	if p48 <= 0 || br.RecoveryTargetUs != 1.2*p48 || !strings.Contains(br.RecoveryTargetIs, "split48") || br.BatchKernelMs <= 0 || br.BatchKernelFrom != "steer-idle's" {
		t.Fatalf("recovery target %v (%s) against split48's %v; kernel %v from %s", br.RecoveryTargetUs, br.RecoveryTargetIs, p48, br.BatchKernelMs, br.BatchKernelFrom)
	}
	moved := false
	for _, r := range rep.Bursts {
		if r.BatchTFLOP <= 0 || r.RecoveryTargetUs != br.RecoveryTargetUs {
			t.Errorf("%s: batch %v TFLOP/s, recovery target %v", r.Layout, r.BatchTFLOP, r.RecoveryTargetUs)
		}
		if idle(r.Layout) {
			if r.Requests != 0 || len(r.BurstFirstMs) != 0 || r.BatchGEMMms <= 0 {
				t.Errorf("%s: %d requests, bursts %v, GEMM %v ms: want none, none and the batch's time", r.Layout, r.Requests, r.BurstFirstMs, r.BatchGEMMms)
			}
		} else if len(r.BurstFirstMs) != 2 || len(r.RecoverySinceFirstMs) != 2 || len(r.RecoveryWindowMs) != 2 || r.BurstFirstMs[0] < 150 {
			t.Errorf("%s: bursts' first requests %v, recoveries %v, %v: want two, the first at 150 ms or later",
				r.Layout, r.BurstFirstMs, r.RecoverySinceFirstMs, r.RecoveryWindowMs)
		}
		if !steered(r.Layout) {
			if r.SMMoveTime != nil || len(r.MoveLog) > 0 {
				t.Errorf("%s: moves %+v", r.Layout, r.MoveLog)
			}
			continue
		}
		// Stats counts the setup's moves too; the log, the measured window's.
		if r.SMMoveTime == nil || r.SMMoveTime.Count != r.Moves || r.SDKRecovery == nil || len(r.MoveLog) > int(r.Moves) {
			t.Errorf("%s: %d moves, %d logged, SMMoveTime %+v, BurstRecovery %+v", r.Layout, r.Moves, len(r.MoveLog), r.SMMoveTime, r.SDKRecovery)
		}
		for _, m := range r.MoveLog {
			if m.Refused == "" && (m.From == m.To || m.TookMs <= 0 || m.Grower == "" || m.AtMs < 0) {
				t.Errorf("%s: move %+v", r.Layout, m)
			}
			moved = moved || m.Grows()
		}
	}
	if !moved {
		t.Error("no growth logged in any steered layout")
	}
	chart, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(chart))
	for {
		if _, err := d.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("chart not well-formed: %v", err)
			}
			break
		}
	}
	c := string(chart)
	marks := 0
	for _, r := range rep.Bursts {
		for _, f := range r.BurstFirstMs {
			if f >= 0 {
				marks++
			}
		}
	}
	if !strings.Contains(c, "recoveries' target") || !strings.Contains(c, "SMs (grow") ||
		strings.Count(c, "after its first request") != marks || strings.Contains(c, "steer-idle") {
		t.Errorf("chart: want the recoveries' target, the moves, a mark per burst of each layout with requests, no idle layout:\n%s", c)
	}
}

// A steered layout's target: -target, or a factor of the round's split48
// burst P99, which must have run before it.
func TestLayoutTarget(t *testing.T) {
	b := burstCfg{target: 300 * time.Microsecond, relFactor: 1.2}
	p48 := 500 * time.Microsecond
	for _, c := range []struct {
		layout string
		x48    float64
		want   time.Duration
	}{
		{"steer", 0, 300 * time.Microsecond},
		{"steer", 1.1, 550 * time.Microsecond},
		{"steer-nobound", 1.1, 550 * time.Microsecond},
		{"steer-r48", 0, 600 * time.Microsecond},
		{"steer-rel", 1.1, 300 * time.Microsecond}, // the pool's own reference; -target unused
	} {
		b.split48x = c.x48
		got, err := b.layoutTarget(c.layout, p48)
		if err != nil || got != c.want {
			t.Errorf("%s with -target-split48 %v: %v, %v; want %v", c.layout, c.x48, got, err, c.want)
		}
	}
	b.split48x = 1.1
	if _, err := b.layoutTarget("steer", 0); !errors.Is(err, ErrBadValue) {
		t.Errorf("steer before split48 ran: %v, want ErrBadValue", err)
	}
}

// A growth's wait is told apart by where it started: from the class's
// floor (a burst's first growth) or from above it (a regrowth after a
// trim, which waits for the batch's kernel on fewer SMs); a shrink or a
// trim is no growth.
func TestGrowthWaitsByWhereTheyStarted(t *testing.T) {
	rows := []BurstRow{{Round: 1, Layout: "steer", SMs: [][2]int{{0, 16}}, BatchSMs: [][2]int{{0, 116}}, MoveLog: []MoveRow{
		{From: 16, To: 48, Kind: "grow_load", TookMs: 1.1, HandoffWaitMs: 1.0, Grower: "interactive"},
		{From: 48, To: 40, Kind: "trim", TookMs: 0.1, HandoffWaitMs: 0.01, Grower: "batch"},
		{From: 40, To: 48, Kind: "grow_p99", TookMs: 2.6, HandoffWaitMs: 2.5, Grower: "interactive"},
		{From: 48, To: 16, Kind: "shrink", TookMs: 0.1, Grower: "batch"},
		{From: 16, To: 40, Kind: "grow_load", TookMs: 0.6, HandoffWaitMs: 0.5, Grower: "interactive"},
		{From: 16, To: 48, Kind: "grow_load", Refused: "closed"},
	}}, {Round: 1, Layout: "steer-idle", BatchGEMMms: 1.45}}
	b := burstCfg{relFactor: 1.2, layouts: []string{"steer", "steer-idle"}}
	rep := finishBursts(rows, b)
	var st *BurstSummary
	for i := range rep.Layouts {
		if rep.Layouts[i].Layout == "steer" {
			st = &rep.Layouts[i]
		}
	}
	if st == nil {
		t.Fatalf("no steer summary in %+v", rep.Layouts)
	}
	if st.Growths != 3 || st.FromFloor == nil || st.FromFloor.N != 2 || st.FromFloor.Max != 1.0 ||
		st.FromAbove == nil || st.FromAbove.N != 1 || st.FromAbove.P99 != 2.5 {
		t.Fatalf("growths %d, from the floor %v, from above it %v: want 3, 2 (max 1.00) and 1 (2.50)", st.Growths, st.FromFloor, st.FromAbove)
	}
	first := slices.IndexFunc(rep.OtherChecks, func(c Check) bool { return strings.Contains(c.Name, "first growth's wait (from the floor") })
	if first < 0 || !rep.OtherChecks[first].Pass || !strings.Contains(rep.OtherChecks[first].Got, "over 2 against 1.45 ms") {
		t.Errorf("other checks %+v: want a first growths' check, passed, over 2 growths against the 1.45 ms kernel", rep.OtherChecks)
	}
	var out bytes.Buffer
	writeBurstReport(&out, rows, rep, b)
	for _, want := range []string{"growths 1.00, 2.50 (from 40), 0.50", "steer's growths' waits (n, P50 / P99 / max): from the floor 2, ", "from above it (after a trim) 1, 2.50 / 2.50 / 2.50 ms"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// A burst's head is the requests that started within headWindow of its
// first, every burst's together: its P99 (a growth's hand-over is served
// there) is reported beside split48's, and a slow head shows though the
// burst's P99 over all its requests does not move.
func TestBurstHeadP99(t *testing.T) {
	b := burstCfg{quiet: 100 * time.Millisecond, burst: 100 * time.Millisecond, cycles: 2, relFactor: 1.2, layouts: []string{"split48", "steer"}}
	row := func(layout string, headUs, restUs float64) BurstRow {
		var reqs []reqRec
		for c := range b.cycles {
			first := time.Duration(c)*b.period() + b.quiet + 2*time.Millisecond
			for i := range 400 { // one every 100 µs: 100 in the head, 300 after it
				at := first + time.Duration(i)*100*time.Microsecond
				us := restUs
				if at-first < headWindow {
					us = headUs
				}
				reqs = append(reqs, reqRec{at: at, us: us})
			}
		}
		return BurstRow{Round: 1, Layout: layout, BurstP99: restUs, reqs: reqs}
	}
	rows := []BurstRow{row("split48", 300, 300), row("steer", 900, 310)}
	rep := finishBursts(rows, b)
	if rows[0].BurstHeadP99 != 300 || rows[1].BurstHeadP99 != 900 {
		t.Fatalf("heads' P99 %v and %v us: want 300 (split48) and 900 (steer)", rows[0].BurstHeadP99, rows[1].BurstHeadP99)
	}
	i := slices.IndexFunc(rep.Layouts, func(s BurstSummary) bool { return s.Layout == "steer" })
	if i < 0 || rep.Layouts[i].HeadP99 != 900 || rep.Layouts[i].HeadToSplit48 != 3 {
		t.Fatalf("steer's summary %+v: want a head P99 of 900 us, 3x split48's", rep.Layouts)
	}
	var out bytes.Buffer
	writeBurstReport(&out, rows, rep, b)
	for _, want := range []string{"first 10ms of each burst: P99 us (/ split48's)", "| steer | 1.03x | 900 (3.00x) |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// The growth a binary was linked with is read from its build settings
// (storm-atonce's -ldflags), and a growth at once says, beside its waits,
// that they measure the switch alone.
func TestLinkedGrowth(t *testing.T) {
	for _, c := range []struct {
		settings []debug.BuildSetting
		want     string
	}{
		{nil, ""},
		{[]debug.BuildSetting{{Key: "-ldflags", Value: "-s -w"}}, ""},
		{[]debug.BuildSetting{{Key: "-ldflags", Value: "-s -w -X github.com/fcsp-go/fcsp-go/internal/smmove.growth=at-once"}}, growthAtOnce},
		{[]debug.BuildSetting{{Key: "-ldflags", Value: "-X github.com/fcsp-go/fcsp-go/internal/smmove.growth=drain"}}, ""},
		{[]debug.BuildSetting{{Key: "-tags", Value: "internal/smmove.growth=at-once"}}, ""},
	} {
		if got := growthOf(c.settings); got != c.want {
			t.Errorf("growthOf(%v) = %q, want %q", c.settings, got, c.want)
		}
	}
	if g := linkedGrowth(); g != "" {
		t.Errorf("the test binary, linked without -X, reads as %q", g)
	}
	rows := []BurstRow{{Round: 1, Layout: "steer", SMs: [][2]int{{0, 16}}, BatchSMs: [][2]int{{0, 116}}, MoveLog: []MoveRow{
		{From: 16, To: 48, Kind: "grow_load", TookMs: 0.01, HandoffWaitMs: 0.001, Grower: "interactive"},
	}}, {Round: 1, Layout: "steer-idle", BatchGEMMms: 1.45}}
	b := burstCfg{relFactor: 1.2, layouts: []string{"steer", "steer-idle"}}
	rep := finishBursts(rows, b)
	rep.Growth = growthAtOnce
	rep.Checks, rep.OtherChecks = burstChecks(rows, rep, b)
	i := slices.IndexFunc(rep.Checks, func(c Check) bool { return strings.Contains(c.Name, "a growth's wait for queued work") })
	if i < 0 || !strings.Contains(rep.Checks[i].Got, "a growth at once: its wait is the switch's alone") {
		t.Errorf("checks %+v: want the growth's wait check to say a growth at once measures the switch alone", rep.Checks)
	}
	var out bytes.Buffer
	writeBurstReport(&out, rows, rep, b)
	if !strings.Contains(out.String(), "This binary's latency class grows at once") {
		t.Errorf("report does not say the binary grows at once:\n%s", out.String())
	}
}
