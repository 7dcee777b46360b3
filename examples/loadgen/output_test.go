package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
)

// With no server listening, loadgen prints no table (it measured nothing)
// and its error says how to have it start one.
func TestNoServerNoTableAndNamesSpawn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	o, err := parseOptions([]string{"-addr", addr, "-duration", "100ms"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := run(context.Background(), o)
	if err == nil {
		t.Fatal("no error with no server")
	}
	if len(rep.Rows) != 0 {
		t.Errorf("%d rows measured against no server: %+v", len(rep.Rows), rep.Rows)
	}
	if !strings.Contains(err.Error(), "-spawn") {
		t.Errorf("the error does not mention -spawn: %v", err)
	}
}

// A spawned server that never comes up gives no row either.
func TestSpawnFailureNoRow(t *testing.T) {
	o, err := parseOptions([]string{"-spawn", t.TempDir() + "/no-such-server", "-modes", "shared", "-alone=false", "-ready-timeout", "2s", "-duration", "100ms"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := run(context.Background(), o)
	if err == nil || len(rep.Rows) != 0 {
		t.Errorf("rows %+v, err %v: want no row and an error", rep.Rows, err)
	}
}

// Rows measured on the simulated device say so under the table.
func TestTableSaysSimulated(t *testing.T) {
	var b bytes.Buffer
	printTable(&b, Report{Rows: []Row{{Mode: "shared", Device: "GPU 0: NVIDIA H200 [simulated]", Simulated: true, Seconds: 1,
		Interactive: Latency{OK: 10, P50: 1, P99: 2}}}})
	if !strings.Contains(b.String(), "simulated") || !strings.Contains(strings.ToLower(b.String()), "not a gpu") {
		t.Errorf("no simulator caveat:\n%s", b.String())
	}
}
