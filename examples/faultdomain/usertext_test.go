package main

import (
	"go/parser"
	"go/token"
	"regexp"
	"testing"
)

// The program's doc (go doc) says what it measures, not which issue asked.
func TestDocNamesNoIssue(t *testing.T) {
	fs := token.NewFileSet()
	f, err := parser.ParseFile(fs, "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?i)\bissues? ?#?\d+`).FindAllString(f.Doc.Text(), -1); len(m) > 0 {
		t.Errorf("the package doc names %q", m)
	}
}
