package smprobe

import (
	"errors"
	"fmt"
	"slices"

	"github.com/fcsp-go/fcsp-go/internal/cuda"
	"github.com/fcsp-go/fcsp-go/internal/lockorder"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// Kernel is a pool's probe kernel, loaded on first use with the primary
// context, which serves every tenant's streams (docs/CONTEXTS.md). The
// zero Kernel is ready for use.
type Kernel struct {
	mu     lockorder.Mutex[lockorder.PoolProbe] // protects the following fields; held across the load and the unload
	mod    cuda.Module                          // guarded by mu
	fn     cuda.Function                        // guarded by mu
	loaded bool                                 // guarded by mu
}

// Function is the kernel's handle, loaded into dev on the first call.
func (k *Kernel) Function(dev *smpart.Device) (cuda.Function, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.loaded {
		return k.fn, nil
	}
	ctx := dev.Primary()
	mod, err := dev.LoadModule(ctx, PTX)
	if err != nil {
		return 0, fmt.Errorf("loading the SM probe: %w", err)
	}
	fn, err := dev.Function(ctx, mod, Name)
	if err != nil {
		return 0, errors.Join(err, dev.UnloadModule(ctx, mod))
	}
	k.mod, k.fn, k.loaded = mod, fn, true
	return fn, nil
}

// Close unloads the kernel, if it was loaded.
func (k *Kernel) Close(dev *smpart.Device) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.loaded {
		return nil
	}
	k.loaded = false
	return dev.UnloadModule(dev.Primary(), k.mod)
}

// Owner is a tenant as the breach rule sees it.
type Owner struct {
	Name        string
	Partitioned bool // SMs of its own
	Rest        bool // the partition that took the rest (unpartitioned tenants share it where no SM is free)
}

// Breaches says, for each tenant whose probe ran on SMs of another's
// partition (sms: each tenant's, by name), whose and how many, sorted;
// what names a tenant is the caller's (its messages' word for one).
// Unpartitioned tenants share SMs with each other, and with the rest's
// partition where no SM is free: neither is a breach.
func Breaches(owners []Owner, sms map[string][]int, name func(string) string) []string {
	var out []string
	for _, own := range owners {
		if !own.Partitioned || sms[own.Name] == nil {
			continue
		}
		for _, o := range owners {
			if o.Name == own.Name || own.Rest && !o.Partitioned {
				continue
			}
			if n := len(Overlap(sms[o.Name], sms[own.Name])); n > 0 {
				out = append(out, fmt.Sprintf("%s ran on %d SMs of %s's partition", name(o.Name), n, name(own.Name)))
			}
		}
	}
	slices.Sort(out)
	return out
}
