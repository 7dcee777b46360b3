package memtrack

import "fmt"

// Reservation is n bytes admitted by Reserve before the driver is asked for
// them. It carries its own undo, as golang.org/x/time/rate's Reservation
// does: Commit attributes the bytes to the pointer the driver returned,
// Cancel gives them back when the driver failed. Whichever comes first
// settles the reservation; later calls do nothing, so
//
//	r, err := a.Reserve(n)
//	if err != nil { return err }
//	defer r.Cancel()              // a no-op once committed
//	p, err := driverAlloc(n)
//	if err != nil { return err }  // the quota is given back
//	return r.Commit(p)
//
// needs no hand-written rollback. A Reservation is a value (Reserve does
// not allocate); it must not be copied once used, and a zero Reservation is
// settled.
type Reservation struct {
	a *Account
	n uint64
}

// Reserve admits an allocation of n bytes against the tenant and the device
// limits, before the driver is asked for the memory. On success the bytes
// count as used until the reservation is cancelled or, once committed, the
// allocation is released. On failure nothing changes and the error is a
// *QuotaError (errors.Is ErrQuotaExceeded), ErrInvalidSize or ErrClosed.
//
// Each limit is enforced with a compare-and-swap loop, so neither counter
// ever exceeds its limit, not even transiently.
func (a *Account) Reserve(n uint64) (Reservation, error) {
	if err := a.reserve(n); err != nil {
		return Reservation{}, err
	}
	return Reservation{a: a, n: n}, nil
}

// Size is the number of bytes reserved (0 once settled).
func (r *Reservation) Size() uint64 { return r.n }

// Commit records the reserved bytes as the live allocation at ptr, so that
// Release(ptr) gives them back. If the record cannot be made (the account
// was closed meanwhile, or ptr is already a live allocation) the reservation
// is cancelled and the error says why: the caller still owns the memory at
// ptr and must free it.
func (r *Reservation) Commit(ptr uint64) error {
	a, n := r.a, r.n
	if a == nil {
		return fmt.Errorf("%w: Commit of a reservation already committed or cancelled", ErrInvalidArgument)
	}
	r.a, r.n = nil, 0
	if err := a.record(ptr, n); err != nil {
		a.unreserve(n) // a no-op after Close, which gave the bytes back
		return err
	}
	return nil
}

// Cancel gives the reserved bytes back. It does nothing once the
// reservation was committed or cancelled.
func (r *Reservation) Cancel() {
	if r.a == nil {
		return
	}
	a, n := r.a, r.n
	r.a, r.n = nil, 0
	a.unreserve(n)
}

// PendingRelease is a live allocation on its way back to the driver: its
// record is gone, so no second free can claim the pointer, but its bytes
// still count until Commit. If the driver refuses the free, Cancel puts the
// record back: the allocation stays tracked, and no other reservation can
// have taken its bytes meanwhile.
type PendingRelease struct {
	a    *Account
	ptr  uint64
	word uint64
}

// StartRelease claims the live allocation at ptr for freeing. A pointer
// that is not a live allocation of this account yields ErrUnknownPointer
// and changes nothing; a closed account, ErrClosed.
func (a *Account) StartRelease(ptr uint64) (PendingRelease, error) {
	if a.used.Load()&closedBit != 0 {
		return PendingRelease{}, ErrClosed
	}
	w, ok := a.t.dropRecord(ptr, a.id)
	if !ok && a.used.Load()&closedBit != 0 {
		return PendingRelease{}, ErrClosed // Close took the record since the look above
	}
	if !ok {
		return PendingRelease{}, fmt.Errorf("%w: no live allocation of the account at %#x", ErrUnknownPointer, ptr)
	}
	return PendingRelease{a: a, ptr: ptr, word: w}, nil
}

// Size is the allocation's size in bytes (0 once settled).
func (r *PendingRelease) Size() uint64 {
	if r.a == nil {
		return 0
	}
	return wordSize(r.word)
}

// Commit gives the allocation's bytes back to the tenant and the device:
// the driver freed it. It does nothing once settled.
func (r *PendingRelease) Commit() {
	if r.a == nil {
		return
	}
	a, n := r.a, wordSize(r.word)
	r.a = nil
	if m := a.sub(n); m > 0 && !a.apart {
		a.t.devRelease(m)
	}
}

// Cancel puts the allocation's record back: the driver kept the memory.
// Its bytes never stopped counting. The only failure is an account closed
// meanwhile (ErrClosed): Close then gave the bytes back and did not see the
// record, so the caller owns the memory and must free it some other way.
// It does nothing once settled.
func (r *PendingRelease) Cancel() error {
	if r.a == nil {
		return nil
	}
	a := r.a
	r.a = nil
	if a.used.Load()&closedBit != 0 {
		return ErrClosed
	}
	if !a.t.addRecord(r.ptr, r.word) {
		// Cannot happen: the pointer was ours until a moment ago and the
		// driver still holds it. Do not leave its bytes counted forever.
		if m := a.sub(wordSize(r.word)); m > 0 && !a.apart {
			a.t.devRelease(m)
		}
		return fmt.Errorf("pointer %#x was recorded again while being freed", r.ptr)
	}
	if a.used.Load()&closedBit != 0 {
		a.t.dropRecord(r.ptr, a.id) // Close may have missed it; as record does
		return ErrClosed
	}
	return nil
}
