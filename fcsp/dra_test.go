package fcsp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fcsp-go/fcsp-go/internal/cuda/fake"
)

// draFile writes a device metadata file (KEP-5304, as NVIDIA's DRA driver
// writes one) whose claim got the GPUs with these UUIDs.
func draFile(t *testing.T, uuids ...string) string {
	t.Helper()
	var devs []string
	for i, u := range uuids {
		devs = append(devs, fmt.Sprintf(`{"driver":"gpu.nvidia.com","pool":"node-1","name":"gpu-%d","attributes":{"type":{"string":"gpu"},"uuid":{"string":%q},"productName":{"string":"NVIDIA H200"}}}`, i, u))
	}
	body := `{"apiVersion":"metadata.resource.k8s.io/v1alpha1","kind":"DeviceMetadata","metadata":{"name":"server-gpu-x7k2p","namespace":"default"},"podClaimName":"gpu","requests":[{"name":"gpu","devices":[` + strings.Join(devs, ",") + `]}]}` + "\n"
	p := filepath.Join(t.TempDir(), "gpu.nvidia.com-metadata.json")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

// Open finds its device by the UUID the claim's metadata names, by option
// or by the variable in the pool's environment; index then counts the
// claim's devices. A claimed device the process does not see is
// ErrDeviceNotVisible, naming what it sees.
func TestOpenByDRAMetadata(t *testing.T) {
	ctx := context.Background()
	two := fake.H200()
	two.Devices = 2
	sim := func() Option { return simulator(two) }
	// The UUIDs the simulator's two GPUs have.
	var uuids []string
	for i := range 2 {
		p, err := Open(ctx, i, sim())
		require.NoError(t, err)
		uuids = append(uuids, p.Device().UUID)
		require.NoError(t, p.Close())
	}
	require.NotEqual(t, uuids[0], uuids[1])

	path := draFile(t, uuids[1])
	for name, opt := range map[string]Option{
		"option":      WithDRAMetadata(path),
		"environment": WithEnviron([]string{"PATH=/bin", "FCSP_DRA_METADATA=" + path}),
	} {
		p, err := Open(ctx, 0, sim(), opt)
		require.NoError(t, err, name)
		require.Equal(t, 1, p.Device().Index, name)
		require.Equal(t, uuids[1], p.Device().UUID, name)
		require.NoError(t, p.Close())
	}
	// A claim of both: index 1 is its second device, the first GPU.
	p, err := Open(ctx, 1, sim(), WithDRAMetadata(draFile(t, uuids[1], uuids[0])))
	require.NoError(t, err)
	require.Equal(t, 0, p.Device().Index)
	require.NoError(t, p.Close())

	// The claim's device is not here.
	absent := "GPU-00000000-1111-2222-3333-444444444444"
	_, err = Open(ctx, 0, sim(), WithDRAMetadata(draFile(t, absent)))
	require.ErrorIs(t, err, ErrDeviceNotVisible)
	for _, want := range []string{absent, uuids[0], uuids[1], "gpu.nvidia.com"} {
		require.Contains(t, err.Error(), want)
	}
	// Past the claim's devices, no file, an empty path.
	_, err = Open(ctx, 1, sim(), WithDRAMetadata(path))
	require.ErrorIs(t, err, ErrInvalidArgument)
	_, err = Open(ctx, 0, sim(), WithDRAMetadata(filepath.Join(t.TempDir(), "none.json")))
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = Open(ctx, 0, sim(), WithDRAMetadata(""))
	require.ErrorIs(t, err, ErrInvalidArgument)
}
