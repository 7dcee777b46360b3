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
// # Lock order
//
// This package's slice of docs/LOCKS.md, each lock's level there in
// parentheses (a lock is taken only under those above it):
//
//	fcsp tenantCore.closing (1)         a tenant's close: Leave takes Engine.mu, then the move lock, under it
//	  smmove Engine.move (2)            one move at a time (a Sem); the one lock a move holds while it waits for calls
//	    tenancy Roster.mu (4)           NewTenant's admit and list, inside Change
//	      smmove Engine.mu (5)          members, leaving, the latency class, the controller, closed; no driver call
//	        admission Tenant.mu (17)    Join starts the controller, which bounds the rest's queue (Member.QueueBound)
//	          admission meter.mu (19)   SetQueueBound's look at the rest's queued work
//	    fcsp tenantCore.mu (6)          Member.Swapper lists a member's streams (the swap itself takes none)
//	    smpart Partition.mu (7)         Claim, Reshape, Unclaim; the commons' Follow (Drained, GaveDrained: TryLock)
//	      smpart Split.mu (8)           a growth's claim, a shrink's give
//	      smpart greens.mu (10)         a layout of the commons built or let go
//	    smpart Split.mu (8)             Version, Commons, Resources: where the commons goes
//	smmove waiters.mu                   outside the ranks: the threads waiting for the move lock (inside.Threads.mu under it)
//	smmove Class.mu                     outside the ranks: a leaf
//
// The members' life-lock gates (Hold) are no mutexes: a move holds them
// under the move lock and takes nothing ranked while it waits for the
// calls they hold back (rule 1; lockorder.Draining checks it). Warm-ups
// run after the move lock is let go (rule 6), and the move that follows
// a partition's close (Released) after its tenant's closing is.
package smmove
