package fcsp

import "github.com/fcsp-go/fcsp-go/internal/greenctx"

// checkWorkQueues refuses a partition where every stream of the process
// shares one queue: its isolation would be luck (greenctx.CheckWorkQueues).
func (p *Pool) checkWorkQueues() error { return greenctx.CheckWorkQueues(p.info.WorkQueues) }
