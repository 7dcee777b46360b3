package fcsp

import (
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/greenctx"
)

// workQueues reads CUDA_DEVICE_MAX_CONNECTIONS, setting it where unset
// (greenctx.WorkQueues says why partitions need several hardware work
// queues).
func workQueues(environ []string, setProcess bool) (int, error) {
	return greenctx.WorkQueues(environ, setProcess)
}

// checkWorkQueues refuses a partition where every stream of the process
// shares one queue: its isolation would be luck.
func (p *Pool) checkWorkQueues() error {
	if p.info.WorkQueues >= 2 {
		return nil
	}
	return fmt.Errorf("%w: CUDA_DEVICE_MAX_CONNECTIONS=%d puts every stream of this process on one hardware work queue, so another class's queued work holds up this partition's whatever its SMs "+
		"(on the H200: a 16-SM partition's P99 of 2.9-4.3 ms against 54-59 µs); unset it (the pool then asks for %d) or set it to 8 or more",
		ErrFewWorkQueues, p.info.WorkQueues, greenctx.WorkQueuesWanted)
}
