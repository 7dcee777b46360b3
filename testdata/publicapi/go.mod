// A module outside fcsp-go that uses only its public API: .ci/run builds it,
// so a public package whose API names an internal type fails CI.
module example.com/publicapi

go 1.26.0

require github.com/fcsp-go/fcsp-go v0.0.0

require golang.org/x/sys v0.50.0 // indirect

replace github.com/fcsp-go/fcsp-go => ../..
