// Package freelist keeps driver handles for reuse until its owner closes:
// the idle streams of a device's primary context, the events of the host
// waits that sleep. Making and destroying the handles stays the owner's:
// the list only says which to reuse, and which are left to destroy.
package freelist

import "sync"

// List is a closable stack of T. The zero value is an empty, open list.
type List[T any] struct {
	mu     sync.Mutex
	items  []T
	closed bool
}

// Take returns a kept item (ok); with none, closed says whether the list
// is closed (the owner then makes no new one) or merely empty.
func (l *List[T]) Take() (item T, ok, closed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.items); n > 0 && !l.closed {
		item = l.items[n-1]
		l.items = l.items[:n-1]
		return item, true, false
	}
	return item, false, l.closed
}

// Put keeps item for a later Take, unless the list is closed or already
// holds max (0: no bound); false: the caller destroys it.
func (l *List[T]) Put(item T, max int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || (max > 0 && len(l.items) >= max) {
		return false
	}
	l.items = append(l.items, item)
	return true
}

// Close closes the list and returns what it kept, for the caller to
// destroy; later Puts are refused and Takes find it closed. A second
// Close returns nothing.
func (l *List[T]) Close() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	items := l.items
	l.items, l.closed = nil, true
	return items
}
