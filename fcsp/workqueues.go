package fcsp

import (
	"fmt"

	"github.com/fcsp-go/fcsp-go/internal/greenctx"
)

// checkWorkQueues refuses a partition where every stream of the process
// shares one queue: its isolation would be luck (greenctx.FewWorkQueues).
func (p *Pool) checkWorkQueues() error {
	if err := greenctx.FewWorkQueues(p.info.WorkQueues); err != nil {
		return fmt.Errorf("%w: %w", ErrFewWorkQueues, err)
	}
	return nil
}
