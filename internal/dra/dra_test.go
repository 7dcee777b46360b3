package dra

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// A file as NVIDIA's driver writes it (one version), and one with a newer,
// unknown version first: the known one is read.
const v1alpha1 = `{"apiVersion":"metadata.resource.k8s.io/v1alpha1","kind":"DeviceMetadata","metadata":{"name":"server-gpu-x7k2p","namespace":"default"},"podClaimName":"gpu","requests":[{"name":"gpu","devices":[{"driver":"gpu.nvidia.com","pool":"node-1","name":"gpu-0","attributes":{"type":{"string":"gpu"},"uuid":{"string":"GPU-5a1d7f3e-0c4b-2e9a-8f61-3b7c9d2e4a10"},"productName":{"string":"NVIDIA H200"},"driverVersion":{"version":"580.65.6"}}}]}]}`

func TestParse(t *testing.T) {
	for name, in := range map[string]string{
		"one version":          v1alpha1,
		"a newer one first":    `{"apiVersion":"metadata.resource.k8s.io/v1beta9","kind":"DeviceMetadata","claim":{"renamed":true}}` + "\n" + v1alpha1,
		"pretty, with a space": strings.ReplaceAll(v1alpha1, ",", ",\n  "),
	} {
		ds, err := Parse(strings.NewReader(in))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := Device{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "node-1", Name: "gpu-0", UUID: "GPU-5a1d7f3e-0c4b-2e9a-8f61-3b7c9d2e4a10"}
		if len(ds) != 1 || ds[0] != want {
			t.Fatalf("%s: %+v", name, ds)
		}
	}
	for name, in := range map[string]string{
		"empty":           "",
		"not JSON":        "uuid=GPU-1",
		"only unknown":    `{"apiVersion":"metadata.resource.k8s.io/v2","kind":"DeviceMetadata"}`,
		"no uuid":         strings.Replace(v1alpha1, `"uuid"`, `"serial"`, 1),
		"no device":       `{"apiVersion":"metadata.resource.k8s.io/v1alpha1","kind":"DeviceMetadata","requests":[{"name":"gpu"}]}`,
		"uuid not string": strings.Replace(v1alpha1, `"uuid":{"string":`, `"uuid":{"int":1,"x":`, 1),
	} {
		_, err := Parse(strings.NewReader(in))
		if !errors.Is(err, errs.ErrInvalidArgument) {
			t.Errorf("%s: %v; want ErrInvalidArgument", name, err)
		}
	}
	_, err := Parse(strings.NewReader(`{"apiVersion":"metadata.resource.k8s.io/v2","kind":"DeviceMetadata"}`))
	if !strings.Contains(err.Error(), "metadata.resource.k8s.io/v1alpha1") || !strings.Contains(err.Error(), "found metadata.resource.k8s.io/v2") {
		t.Errorf("%v: want the versions read and found", err)
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "gpu.nvidia.com-metadata.json")
	if err := os.WriteFile(p, []byte(v1alpha1+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ds, err := Read(p); err != nil || len(ds) != 1 {
		t.Fatalf("%v %v", ds, err)
	}
	_, err := Read(filepath.Join(dir, "missing.json"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "KEP-5304") {
		t.Fatalf("%v: want ErrNotExist, saying where the file comes from", err)
	}
}

func TestSameUUID(t *testing.T) {
	var u [16]byte
	for i := range u {
		u[i] = byte(i * 17)
	}
	s := FormatUUID(u)
	if s != "GPU-00112233-4455-6677-8899-aabbccddeeff" {
		t.Fatal(s)
	}
	for _, v := range []string{s, strings.ToUpper(s), "MIG-" + s[4:], s[4:]} {
		if !sameUUID(u, v) {
			t.Errorf("%s is not %s", v, s)
		}
	}
	if sameUUID(u, "GPU-00112233-4455-6677-8899-aabbccddeef0") {
		t.Error("a different UUID matched")
	}
}
