package fcsp

import (
	"fmt"
	"os"
	"strconv"
	"strings"
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

// workQueuesWanted is what the pool asks for when the variable is unset:
// enough for every stream of a few partitioned classes to get its own.
const workQueuesWanted = 32

// workQueues reads CUDA_DEVICE_MAX_CONNECTIONS from environ (nil: the
// process's environment). Unset, it is set to workQueuesWanted in the
// process's environment, which the driver reads when it makes the
// device's context, so before the pool opens it; set, it is taken as is.
func workQueues(environ []string, setProcess bool) (n int, err error) {
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
			if err := os.Setenv("CUDA_DEVICE_MAX_CONNECTIONS", strconv.Itoa(workQueuesWanted)); err == nil {
				return workQueuesWanted, nil
			}
		}
		return 8, nil // the driver's default
	}
	n, err = strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > 32 {
		return 0, fmt.Errorf("%w: CUDA_DEVICE_MAX_CONNECTIONS=%q; the driver takes 1 to 32", ErrInvalidArgument, v)
	}
	return n, nil
}

// checkWorkQueues refuses a partition where every stream of the process
// shares one queue: its isolation would be luck.
func (p *Pool) checkWorkQueues() error {
	if p.info.WorkQueues >= 2 {
		return nil
	}
	return fmt.Errorf("%w: CUDA_DEVICE_MAX_CONNECTIONS=%d puts every stream of this process on one hardware work queue, so another class's queued work holds up this partition's whatever its SMs "+
		"(on the H200: a 16-SM partition's P99 of 2.9-4.3 ms against 54-59 µs); unset it (the pool then asks for %d) or set it to 8 or more",
		ErrFewWorkQueues, p.info.WorkQueues, workQueuesWanted)
}
