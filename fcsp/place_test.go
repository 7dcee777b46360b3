package fcsp

import (
	"github.com/fcsp-go/fcsp-go/internal/greenctx"
	"github.com/fcsp-go/fcsp-go/internal/place"
)

// partition is the tenant's partition, for tests that look inside it; nil
// for a tenant that shares the whole device.
func (c *tenantCore) partition() *greenctx.Partition {
	if g, ok := c.place.Placement.(place.Green); ok {
		return g.Part
	}
	return nil
}
