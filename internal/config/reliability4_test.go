package config

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// Issue 39 #14: a tenant's name is a label value of every metric of the
// tenant, and one that is not valid UTF-8 failed every scrape of the pool.
// Resolve (NewTenant) refuses it, and the empty name, with
// ErrInvalidArgument saying what is allowed; any other UTF-8 is a name.
func TestResolveRefusesUnusableNames(t *testing.T) {
	for _, name := range []string{"", "bad\xff", "\xc3", "ok\xed\xa0\x80"} { // the last: a UTF-16 surrogate
		var c Tenant
		err := c.Resolve(name, 0, false, slog.Default())
		if !errors.Is(err, errs.ErrInvalidArgument) {
			t.Fatalf("name %q: %v; want ErrInvalidArgument", name, err)
		}
		if !strings.Contains(err.Error(), "valid UTF-8") {
			t.Fatalf("name %q: %q does not say what a name may be", name, err)
		}
	}
	for _, name := range []string{"t", "ünïcödé-租户", "with space", `quote"and\backslash`, "line\nbreak"} {
		var c Tenant
		if err := c.Resolve(name, 0, false, slog.Default()); err != nil {
			t.Fatalf("name %q: %v", name, err)
		}
	}
}
