package main

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzConfigFile feeds arbitrary bytes to the -config loader and the
// validation behind it: they may refuse, never panic.
func FuzzConfigFile(f *testing.F) {
	f.Add([]byte(`{"Mode":"partitioned","Interactive":{"SMs":16}}`))
	f.Add([]byte(`{"Mode":"shared","Batch":{"SMLimit":1.5}}`))
	f.Add([]byte(`{"Nope":1}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "c.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c := defaultConfig()
		if err := loadFile(path, &c); err != nil {
			return
		}
		_ = c.validate()
	})
}
