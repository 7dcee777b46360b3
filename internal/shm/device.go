package shm

import "fmt"

// DeviceShare is a slot's usage of one device beside the region's total for
// it: what memtrack.WithShared takes (a memtrack.SharedDevice), so that the
// public quota package names no type of this one.
type DeviceShare struct {
	usage Usage
	r     *Region
	dev   int
}

// Device returns the slot's share of device dev, or an error naming the
// devices the region has.
func (s *Slot) Device(dev int) (*DeviceShare, error) {
	if l := s.r.Layout(); dev < 0 || dev >= l.Devices {
		return nil, fmt.Errorf("shared region: device %d out of range; the region has devices 0..%d", dev, l.Devices-1)
	}
	return &DeviceShare{usage: s.Usage(dev), r: s.r, dev: dev}, nil
}

// Add adds n bytes to the slot's usage of the device; ErrReaped once a
// reaper took the slot over (see Usage.Add).
func (d *DeviceShare) Add(n uint64) error { return d.usage.Add(n) }

// Sub subtracts n bytes from the slot's usage of the device; ErrReaped once
// a reaper took the slot over.
func (d *DeviceShare) Sub(n uint64) error { return d.usage.Sub(n) }

// Used is the device's usage summed over every slot of the region.
func (d *DeviceShare) Used() uint64 { return d.r.DeviceUsed(d.dev) }
