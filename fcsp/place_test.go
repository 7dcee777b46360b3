package fcsp

import (
	"github.com/fcsp-go/fcsp-go/internal/place"
	"github.com/fcsp-go/fcsp-go/internal/smpart"
)

// partition is the tenant's partition, for tests that look inside it; nil
// for a tenant that shares the whole device.
func (c *tenantCore) partition() *smpart.Partition {
	if g, ok := c.place.Placement.(place.Green); ok {
		return g.Part
	}
	return nil
}
