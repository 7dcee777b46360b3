package smpart

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	envpkg "github.com/fcsp-go/fcsp-go/internal/environ"
	"github.com/fcsp-go/fcsp-go/internal/errs"
)

// The hardware work queues. Each stream is mapped onto one of the device's
// work queues (connections), as many as CUDA_DEVICE_MAX_CONNECTIONS says
// (the driver's default is 8), and work in one queue runs in order whatever
// its stream's green context: with CUDA_DEVICE_MAX_CONNECTIONS=1, a
// setting training stacks commonly export, a 16-SM partition's P99 on the
// H200 was 2874-4285 µs beside a batch class, no better than no partition
// (4259-4295), against 54-59 µs unset or at 32. Driver 13.1 adds
// work-queue resources for green contexts; the H200 lent here runs 13.0,
// so the SDK uses the variable alone.

// WorkQueuesWanted is what a pool asks for when the variable is unset:
// enough for every stream of a few partitioned classes to get its own.
const WorkQueuesWanted = 32

// WorkQueues reads CUDA_DEVICE_MAX_CONNECTIONS from environ laid over the
// process's environment (internal/environ: environ's setting, else the
// process's; the first setting of either wins). The driver reads the
// process's when it makes the device's context, so before the pool opens,
// where setProcess says so (the real driver), the process's is made to
// say what the pool read: WorkQueuesWanted where neither sets it, environ's
// value where environ sets it; a value the process set itself is kept.
// Unset, without setProcess, it is the driver's default, 8. A value the
// driver would not take is errs.ErrInvalidArgument.
func WorkQueues(environ []string, setProcess bool) (n int, err error) {
	const key = "CUDA_DEVICE_MAX_CONNECTIONS"
	env := envpkg.Over(environ)
	v, ok := env.Lookup(key)
	if !ok || v == "" {
		if setProcess {
			if err := os.Setenv(key, strconv.Itoa(WorkQueuesWanted)); err == nil {
				return WorkQueuesWanted, nil
			}
		}
		return 8, nil // the driver's default
	}
	n, err = strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > 32 {
		return 0, fmt.Errorf("%w: %s=%q; the driver takes 1 to 32", errs.ErrInvalidArgument, key, v)
	}
	if setProcess && env.FromList(key) {
		if err := os.Setenv(key, v); err != nil {
			return 0, fmt.Errorf("%w: %s=%q from the pool's environment cannot be exported to the process's, where the driver reads it: %v", errs.ErrInvalidArgument, key, v, err)
		}
	}
	return n, nil
}
