package fcsp

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The README is read by users on machines of their own: it carries no
// notes of where its figures were taken or how binaries reached that
// machine, and each of its wall times is a range with the load it was
// measured under, not one figure from one run.
func TestREADMEIsForUsers(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	flat := strings.Join(strings.Fields(readme), " ")
	for _, note := range []string{"lent to this project", "carries 64 MiB", "not re-run here", "the issue also named", "this machine (not"} {
		if strings.Contains(flat, note) {
			t.Errorf("README holds a lab note: %q", note)
		}
	}
	// The timing table: every wall time is a range, and the load is said.
	start := strings.Index(readme, "**How long it takes.**")
	end := strings.Index(readme, "**GPU tests**")
	if start < 0 || end < start {
		t.Fatal("no timing section")
	}
	section := readme[start:end]
	if !strings.Contains(section, "load") {
		t.Error("the timing section does not say the machine's load")
	}
	rows := regexp.MustCompile(`(?m)^\| `+"`"+`[^|]*`+"`"+`[^|]*\| ([^|]+) \|$`).FindAllStringSubmatch(section, -1)
	if len(rows) < 5 {
		t.Fatalf("%d timing rows", len(rows))
	}
	rng := regexp.MustCompile(`^[0-9.]+-[0-9.]+ s`)
	for _, r := range rows {
		if !rng.MatchString(strings.TrimSpace(r[1])) {
			t.Errorf("timing %q is not a range", r[1])
		}
	}
	// The first program's figures too.
	first := regexp.MustCompile("`interactive 16 SMs` after ([^ ]+ s)[^.]*and ([^ ]+ s)").FindStringSubmatch(flat)
	if first == nil {
		t.Fatal("no timing of the first program")
	}
	for _, f := range first[1:] {
		if !strings.Contains(f, "-") {
			t.Errorf("first program's %q is not a range", f)
		}
	}
}
