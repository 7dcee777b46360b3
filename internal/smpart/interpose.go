package smpart

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	envpkg "github.com/fcsp-go/fcsp-go/internal/environ"
)

// Where partitions cannot hold. An NVIDIA MPS client's kernels share the
// device's SMs with the other clients' (the daemon schedules every client
// on the whole device, or on its active-thread percentage of it), and an
// LD_PRELOAD layer that interposes on the driver (HAMi-core's libvgpu.so,
// for one) sees and may throttle every call the SDK makes. Neither is an
// error: the pool still works, but a partition's SMs are not its own, and
// a limit of the layer applies on top of the pool's. Caveats says so, so
// that Open can warn and DeviceInfo can show it.

// mpsPipeDefault is where an MPS daemon listens unless
// CUDA_MPS_PIPE_DIRECTORY says otherwise: a client connects by itself
// when a daemon is there.
const mpsPipeDefault = "/tmp/nvidia-mps"

// interposers are base-name fragments of preloaded libraries known to
// interpose on the CUDA driver.
var interposers = []string{"vgpu", "hami", "cuda", "nvshare", "gpushare", "gpu-share"}

// Caveats lists what in environ laid over the process's environment
// (internal/environ), and in the file system, keeps this process's
// partitions from being its own.
func Caveats(environ []string) []string {
	get := envpkg.Over(environ).Lookup
	var out []string
	if v, ok := get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"); ok && v != "" {
		if pct, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && pct < 100 {
			out = append(out, fmt.Sprintf("NVIDIA MPS client at CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%s: partitions come from this client's share of the SMs, and other clients' kernels run beside them; the driver may refuse to split at all (then unpartitioned tenants only)", v))
		}
	}
	pipe, set := get("CUDA_MPS_PIPE_DIRECTORY")
	if !set || pipe == "" {
		pipe = mpsPipeDefault
	}
	if len(out) == 0 && mpsListens(filepath.Join(pipe, "control")) {
		out = append(out, fmt.Sprintf("an NVIDIA MPS daemon listens at %s: this process is its client, and other clients' kernels run on the partitions' SMs", pipe))
	}
	if v, _ := get("LD_PRELOAD"); v != "" {
		for _, lib := range strings.FieldsFunc(v, func(r rune) bool { return r == ':' || r == ' ' }) {
			base := strings.ToLower(filepath.Base(lib))
			for _, frag := range interposers {
				if strings.Contains(base, frag) {
					out = append(out, fmt.Sprintf("LD_PRELOAD=%s interposes on the CUDA driver: its limits apply on top of the pool's and it sees every call; the pool's isolation assumes direct calls (unset it for this process)", lib))
					break
				}
			}
		}
	}
	return out
}

// mpsListens reports whether an MPS daemon answers at its control socket.
// A daemon that quit leaves the socket file behind (echo quit |
// nvidia-cuda-mps-control does), and a client finds nobody there and runs
// on its own, so the file alone says nothing: connect. Only a refusal or
// no file means no daemon; anything else (a socket this user may not
// open) is taken as one.
func mpsListens(control string) bool {
	c, err := net.DialTimeout("unix", control, 100*time.Millisecond)
	if err == nil {
		c.Close()
		return true
	}
	return !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, fs.ErrNotExist)
}
