package environ

import (
	"testing"
)

// The two rules: first setting wins; the list overlays the process's.
func TestLookup(t *testing.T) {
	e := Of([]string{"A=1", "A=2", "B=", "noequals", "=x", "C=a=b"}, []string{"A=9", "D=4", "D=5", "B=7"})
	for _, c := range []struct {
		key, want string
		ok, list  bool
	}{
		{"A", "1", true, true}, // first in the list, not the last, not the process's
		{"B", "", true, true},  // set empty in the list: set, and the process's not read
		{"C", "a=b", true, true},
		{"D", "4", true, false}, // first in the process
		{"E", "", false, false},
		{"noequals", "", false, false},
		{"", "", false, false},
	} {
		v, ok := e.Lookup(c.key)
		if v != c.want || ok != c.ok || e.FromList(c.key) != c.list {
			t.Errorf("%q: %q %v (from the list %v); want %q %v %v", c.key, v, ok, e.FromList(c.key), c.want, c.ok, c.list)
		}
	}
	var got []string
	e.Each(func(k, v string) { got = append(got, k+"="+v) })
	want := []string{"A=1", "B=", "C=a=b", "D=4"}
	if len(got) != len(want) {
		t.Fatalf("Each: %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Each: %v, want %v", got, want)
		}
	}
}

// Over reads the process's environment as os.Getenv does.
func TestOver(t *testing.T) {
	t.Setenv("FCSP_ENVIRON_TEST", "proc")
	if v, ok := Over(nil).Lookup("FCSP_ENVIRON_TEST"); !ok || v != "proc" {
		t.Fatalf("%q %v", v, ok)
	}
	if v, _ := Over([]string{"FCSP_ENVIRON_TEST=list"}).Lookup("FCSP_ENVIRON_TEST"); v != "list" {
		t.Fatalf("the list does not overlay: %q", v)
	}
}
