package fcsp

import (
	"context"
	"runtime"

	"github.com/fcsp-go/fcsp-go/internal/admission"
)

// Do's metering and admission (WithGPUMetering, WithGPUShare) are
// internal/admission's (Tenant.BeginDo, Run).

var errTakenAfterDo = admission.ErrTakenAfterDo

// TryDo is Do without waiting for GPU-share tokens: under WithGPUShare, if
// the tenant's bucket does not hold f's predicted cost now, it returns
// ErrThrottled, charging nothing and not running f. It still waits, as Do,
// for a partitioned tenant's exclusion (ctx ends that wait). Without a GPU
// share it is Do.
func (t *Tenant) TryDo(ctx context.Context, f func(Current) error) error {
	defer runtime.KeepAlive(t)
	return t.c.runDo(ctx, f, true)
}
