package main

import (
	"bytes"
	"context"
	"go/parser"
	"go/token"
	"regexp"
	"strings"
	"testing"
	"time"
)

// issueRef is a reference to the project's issue tracker, which a user of
// the program cannot follow.
var issueRef = regexp.MustCompile(`(?i)\bissues? ?#?\d+|issue's`)

// storm -h and the program's doc (go doc) say what it does, not which
// issue asked for it.
func TestHelpAndDocNameNoIssue(t *testing.T) {
	var out, errw bytes.Buffer
	_ = run(context.Background(), []string{"-h"}, &out, &errw)
	if m := issueRef.FindAllString(errw.String(), -1); len(m) > 0 {
		t.Errorf("storm -h names %q", m)
	}
	fs := token.NewFileSet()
	f, err := parser.ParseFile(fs, "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	if m := issueRef.FindAllString(f.Doc.Text(), -1); len(m) > 0 {
		t.Errorf("the package doc names %q", m)
	}
}

// With no flags and no GPU, storm runs a short matrix on the simulator
// and says so first: what it runs, what it costs, and that the checks are
// the GPU's to judge (none printed as FAIL). The full matrix took 2 min 40 s
// there and ended in 25 FAIL lines.
func TestNoFlagsOnTheSimulatorIsShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the program")
	}
	var out, errw bytes.Buffer
	start := time.Now()
	if err := run(context.Background(), nil, &out, &errw); err != nil {
		t.Fatalf("%v\n%s\n%s", err, out.String(), errw.String())
	}
	took := time.Since(start)
	s := out.String()
	first, _, _ := strings.Cut(s, "\n")
	for _, want := range []string{"simulated", "about", "s:"} {
		if !strings.Contains(first, want) {
			t.Errorf("first line %q lacks %q", first, want)
		}
	}
	if took > 40*time.Second {
		t.Errorf("took %v", took)
	}
	if strings.Contains(s, "\nFAIL ") {
		t.Errorf("FAIL lines on the simulator:\n%s", s)
	}
	if !strings.Contains(s, "| partitioned | 1 | all | chain |") || !strings.Contains(s, "n/a") {
		t.Errorf("no table row or unjudged checks:\n%s", s)
	}
}
