package main

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzRequestBody feeds arbitrary bodies to the request decoder (class.size):
// it may refuse, never panic, and what it takes is a size the class allows.
func FuzzRequestBody(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"n":16}`, `{"n":0}`, `{"n":-1}`, `{"n":4097}`, `{"n":2147483648}`,
		`{"n":1e3}`, `{"n":"16"}`, `{"n":16} garbage`, `{"n":16}{"n":17}`, `[`, `null`, `{"n":16,"n":17}`,
		`{"N":16}`, `{"n":9223372036854775808}`, "\xff\xfe", strings.Repeat(`{"a":`, 600) + `1` + strings.Repeat(`}`, 600)} {
		f.Add([]byte(s))
	}
	c := &class{name: "fuzz", cfg: classConfig{N: 4096, MaxN: 1 << 16}}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", "/v1/interactive", strings.NewReader(string(body)))
		n, err := c.size(httptest.NewRecorder(), r)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("%q: an empty error", body)
			}
			return
		}
		if n < 1 || n > c.cfg.MaxN {
			t.Fatalf("%q: n %d taken; the class allows 1 to %d", body, n, c.cfg.MaxN)
		}
	})
}
