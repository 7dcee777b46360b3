package fcsp

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestLockOrderIsChecked provokes two violations on purpose; what it
// provokes is its own to read, not the user's: `go test` in this
// directory (the command the README gives) prints no lock-order report or
// stack for it. The test binary runs that test alone and its output is
// read back.
func TestLockOrderCheckPrintsNothing(t *testing.T) {
	skipUnchecked(t)
	if os.Getenv("FCSP_LOCKORDER_CHILD") != "" {
		t.Skip("the child run")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockOrderIsChecked$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "FCSP_LOCKORDER_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "--- PASS: TestLockOrderIsChecked") {
		t.Fatalf("the test did not pass:\n%s", s)
	}
	for _, bad := range []string{"lock order:", "goroutine ", "[running]"} {
		if strings.Contains(s, bad) {
			t.Errorf("the output holds %q: a provoked violation reached the user:\n%s", bad, s)
		}
	}
}
