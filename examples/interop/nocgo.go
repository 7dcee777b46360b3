//go:build !cgo

// Command interop needs cgo: it calls a C function (see main.go).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "interop: built without cgo; it calls C (CGO_ENABLED=1 and a C compiler)")
	os.Exit(2)
}
