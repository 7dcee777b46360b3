package fcsp

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The driver's handles print as the driver's addresses do (hex, as
// DevicePtr), and a Workspace says what it is, not its fields.
func TestHandlesPrintAsAddresses(t *testing.T) {
	p, _ := openSim(t)
	tn, err := p.NewTenant("x", WithSMs(16))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, tn.Do(ctx, func(cur Current) error {
		c := cur.Context()
		require.Equal(t, fmt.Sprintf("%#x", c.Uintptr()), fmt.Sprint(c))
		require.Equal(t, fmt.Sprintf("%#x", c.Uintptr()), fmt.Sprintf("%v", c))
		s, err := cur.Stream(nil)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("%#x", s.Uintptr()), fmt.Sprint(s))
		ws, err := cur.Workspace(nil, 4096)
		require.NoError(t, err)
		got := fmt.Sprint(ws)
		require.Equal(t, fmt.Sprintf(`workspace %v (4 KiB) of tenant "x"`, ws.Ptr()), got)
		require.False(t, strings.Contains(got, "{"), got)
		require.NoError(t, ws.Close())
		require.Equal(t, fmt.Sprintf(`workspace %v (4 KiB) of tenant "x", closed`, ws.Ptr()), fmt.Sprint(ws))
		return nil
	}))
	require.Equal(t, "0x1000", fmt.Sprint(DevicePtr(0x1000)))
	require.Equal(t, "0x0", fmt.Sprint(ContextHandle{}))
	var nilWS *Workspace
	require.Equal(t, "workspace <nil>", fmt.Sprint(nilWS))
	require.Equal(t, "workspace <nil>", fmt.Sprint(&Workspace{}))
}
