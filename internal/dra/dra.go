// Package dra finds the GPU a Kubernetes DRA claim gave this container, by
// the device metadata file the kubelet mounts into it (KEP-5304, "DRA
// device attributes downward API": alpha in Kubernetes 1.36, beta in
// 1.37). The file of a claim made from a ResourceClaimTemplate is
//
//	/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/<podClaimName>/<requestName>/<driverName>-metadata.json
//
// and of a claim named in the pod spec
//
//	/var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claimName>/<requestName>/<driverName>-metadata.json
//
// It is a stream of JSON objects: the same DeviceMetadata once per API
// version the driver writes, newest first. Read takes the first version it
// knows (metadata.resource.k8s.io/v1alpha1) and skips the others, as
// k8s.io/dynamic-resource-allocation/devicemetadata does, so that a driver
// writing a newer version beside it breaks nothing. A device's UUID is its
// "uuid" attribute, as NVIDIA's DRA driver for GPUs (gpu.nvidia.com)
// publishes it; Ordinal finds the CUDA device that has it.
package dra

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// ErrNotVisible: the device the claim got is not among the devices the
// driver shows this process (fcsp.ErrDeviceNotVisible).
var ErrNotVisible = errors.New("the claimed device is not visible to this process")

// Env names the device metadata file when no option does
// (fcsp.WithEnviron's environment).
const Env = "FCSP_DRA_METADATA"

// Versions are the metadata API versions Read understands, in the order
// it prefers them.
var Versions = []string{"metadata.resource.k8s.io/v1alpha1"}

// Device is one device the claim's request got.
type Device struct {
	Request string // the claim's request
	Driver  string // the DRA driver, e.g. gpu.nvidia.com
	Pool    string // its resource pool (a node's, for a GPU)
	Name    string // its name in the pool, e.g. gpu-0
	UUID    string // its "uuid" attribute: GPU-... (MIG-... for a MIG device)
}

func (d Device) String() string {
	return fmt.Sprintf("%s (%s/%s/%s, request %s)", d.UUID, d.Driver, d.Pool, d.Name, d.Request)
}

// metadata is the part of a DeviceMetadata object Read uses.
type metadata struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Requests   []struct {
		Name    string `json:"name"`
		Devices []struct {
			Driver     string `json:"driver"`
			Pool       string `json:"pool"`
			Name       string `json:"name"`
			Attributes map[string]struct {
				String *string `json:"string"`
			} `json:"attributes"`
		} `json:"devices"`
	} `json:"requests"`
}

// Read reads the metadata file at path: the devices of its requests, in
// the file's order.
func Read(path string) ([]Device, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("DRA device metadata: %w (is the claim's driver writing device metadata? KEP-5304: the cluster's feature and the driver's, e.g. NVIDIA's DeviceMetadata feature gate)", err)
	}
	defer f.Close()
	ds, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("DRA device metadata %s: %w", path, err)
	}
	return ds, nil
}

// Parse reads a metadata stream (Read's, from r).
func Parse(r io.Reader) ([]Device, error) {
	dec := json.NewDecoder(r)
	var seen []string
	for {
		var m metadata
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%w: not a JSON stream of DeviceMetadata objects: %v", errs.ErrInvalidArgument, err)
		}
		if m.Kind != "DeviceMetadata" || !known(m.APIVersion) {
			seen = append(seen, m.APIVersion+" "+m.Kind)
			continue // a version this SDK does not know: a newer driver's, written beside one it knows
		}
		return devices(m)
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("%w: empty: no DeviceMetadata object", errs.ErrInvalidArgument)
	}
	return nil, fmt.Errorf("%w: no DeviceMetadata of a version this SDK reads (%s); found %s", errs.ErrInvalidArgument,
		strings.Join(Versions, ", "), strings.Join(seen, ", "))
}

func known(v string) bool {
	for _, k := range Versions {
		if v == k {
			return true
		}
	}
	return false
}

func devices(m metadata) ([]Device, error) {
	var out []Device
	for _, r := range m.Requests {
		for _, d := range r.Devices {
			dev := Device{Request: r.Name, Driver: d.Driver, Pool: d.Pool, Name: d.Name}
			if a, ok := d.Attributes["uuid"]; ok && a.String != nil {
				dev.UUID = *a.String
			}
			if dev.UUID == "" {
				return nil, fmt.Errorf("%w: device %s/%s/%s has no \"uuid\" string attribute (a GPU of NVIDIA's DRA driver has one)", errs.ErrInvalidArgument, d.Driver, d.Pool, d.Name)
			}
			out = append(out, dev)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: the claim's requests list no device", errs.ErrInvalidArgument)
	}
	return out, nil
}

// Ordinal is the CUDA ordinal of the i-th device of the claim whose
// metadata file is at path, found among the devices drv shows by UUID.
// ErrNotVisible, naming the UUIDs visible, where none has it.
func Ordinal(drv cuda.Driver, path string, i int) (int, error) {
	ds, err := Read(path)
	if err != nil {
		return 0, err
	}
	if i < 0 || i >= len(ds) {
		return 0, fmt.Errorf("%w: device index %d of a DRA claim of %d device(s) (%s); want 0 to %d", errs.ErrInvalidArgument, i, len(ds), path, len(ds)-1)
	}
	want := ds[i]
	n, err := drv.DeviceCount()
	if err != nil {
		return 0, err
	}
	var visible []string
	for o := range n {
		dev, err := drv.DeviceGet(o)
		if err != nil {
			return 0, err
		}
		u, err := drv.DeviceUUID(dev)
		if err != nil {
			return 0, err
		}
		if sameUUID(u, want.UUID) {
			return o, nil
		}
		visible = append(visible, FormatUUID(u))
	}
	seen := "none"
	if len(visible) > 0 {
		seen = strings.Join(visible, ", ")
	}
	return 0, fmt.Errorf("%w: the DRA claim's device %v (%s) is not among this process's GPUs: %s (CUDA_VISIBLE_DEVICES, or a container runtime that did not apply the claim's CDI devices?)",
		ErrNotVisible, want, path, seen)
}

// FormatUUID is u as nvidia-smi prints a GPU's: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
func FormatUUID(u [16]byte) string {
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// sameUUID compares the driver's 16 bytes with an attribute's text, which
// may say GPU- or MIG- (the bytes are the same) and any case.
func sameUUID(u [16]byte, s string) bool {
	s = strings.ToLower(s)
	for _, p := range []string{"gpu-", "mig-"} {
		s = strings.TrimPrefix(s, p)
	}
	return strings.ReplaceAll(s, "-", "") == fmt.Sprintf("%x", u[:])
}
