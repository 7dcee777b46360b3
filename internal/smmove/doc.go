// Package smmove is how SMs change hands in a pool: the moves of the
// commons (the SMs no partition holds, where the unpartitioned tenants
// run) as partitions are made, closed and reshaped; the steps of a
// Reshape (a growth's claim, the commons' move off it, the wait for the
// work queued on the SMs it takes, the switch, a shrink's commons' move
// onto what it gave); and the controller that moves SMs between a latency
// class and the rest tenant as the class's load comes and goes
// (internal/smctl decides; this package samples and moves).
//
// It reaches a pool's tenants through Member, which the face implements:
// their new calls held back and let go (their life locks), their streams'
// handles swapped, their launch-rate limits resized, their warm-ups run
// again, their placements. What a placement can do it asks of the
// placement (internal/place), never which one it is.
//
// # The move protocol
//
// A move holds a tenant's new calls back while it switches the tenant's
// streams, and waits for the calls in flight: one of them could otherwise
// queue work on a handle being replaced. A call in flight may be a Do,
// whose function may call any tenant, this one's neighbours included; so
// a move must never wait for a call that is held back by what the move
// holds. The rules (docs/LOCKS.md, "The move protocol"):
//
//  1. One move at a time per pool, under the move lock (Engine.move):
//     NewTenant's changes, every Reshape, every move of the commons and
//     each of the controller's trades. No other lock is held while a move
//     waits for calls (lockorder.Draining checks it where enabled).
//  2. A move holds back at most the members it moves, all at once, and
//     waits until none of them has a call in flight at one time (hold);
//     a shrink's move of the commons comes after the shrink let its own
//     tenant's calls go, never inside it.
//  3. A call made from inside a Do of a member the move holds passes
//     every gate the move holds (the move's Passer): that Do is counted
//     in flight, so the move cannot switch while it runs, and it would
//     otherwise wait for the move that waits for it.
//  4. A caller waiting for the move lock from inside a Do of a member the
//     move waits for makes the move give way: it lets its holds and the
//     lock go, the caller takes the lock, and the move starts its step
//     again after it (errAgain). Every step of a move reads again what it
//     acts on after such a wait.
//  5. Every wait of a move ends with its context (a Reshape's caller's,
//     or the controller's stop): a hold, the wait for the lock, the
//     bounded wait for the givers' queued work. A move that fails changes
//     nothing it cannot undo.
//  6. Nothing of the server's code runs inside a move: warm-ups run again
//     after the move lock is let go (Member.Rewarm).
//  7. A move never makes a Do of a tenant it holds wait for itself: from
//     inside such a Do it is refused (errs.ErrInsideDo), or, for the
//     commons' moves that follow a change, left to the next change.
//
// # Locks
//
// Each a place in docs/LOCKS.md's order:
//
//	Engine.move (lockorder.PoolMove: a Sem; a move may wait for calls under it, holding nothing else)
//	└── Engine.mu (lockorder.MoveMembers: members, the controller, the latency class; no driver call)
//	    └── waiters.mu, Class.mu (leaves)
package smmove
