package smpart

import (
	"fmt"
	"os"
	"strconv"
	"strings"

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

// WorkQueues reads CUDA_DEVICE_MAX_CONNECTIONS from environ (nil: the
// process's environment). Unset, it is set to WorkQueuesWanted in the
// process's environment when setProcess says so, which the driver reads
// when it makes the device's context, so before the pool opens it; set, it
// is taken as is. A value the driver would not take is errs.ErrInvalidArgument.
func WorkQueues(environ []string, setProcess bool) (n int, err error) {
	v, ok := "", false
	if environ == nil {
		v, ok = os.LookupEnv("CUDA_DEVICE_MAX_CONNECTIONS")
	} else {
		for _, kv := range environ {
			if k, val, found := strings.Cut(kv, "="); found && k == "CUDA_DEVICE_MAX_CONNECTIONS" {
				v, ok = val, true
			}
		}
	}
	if !ok || v == "" {
		if setProcess {
			if err := os.Setenv("CUDA_DEVICE_MAX_CONNECTIONS", strconv.Itoa(WorkQueuesWanted)); err == nil {
				return WorkQueuesWanted, nil
			}
		}
		return 8, nil // the driver's default
	}
	n, err = strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > 32 {
		return 0, fmt.Errorf("%w: CUDA_DEVICE_MAX_CONNECTIONS=%q; the driver takes 1 to 32", errs.ErrInvalidArgument, v)
	}
	return n, nil
}
