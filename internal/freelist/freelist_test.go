package freelist

import (
	"sync"
	"testing"
)

// Items come back last in first out, up to the bound; a closed list keeps
// nothing, hands out nothing and returns what it held once.
func TestList(t *testing.T) {
	var l List[int]
	if _, ok, closed := l.Take(); ok || closed {
		t.Fatalf("an empty list: ok %v closed %v", ok, closed)
	}
	for i := 1; i <= 2; i++ {
		if !l.Put(i, 2) {
			t.Fatalf("Put %d refused under the bound", i)
		}
	}
	if l.Put(3, 2) {
		t.Fatal("Put kept a third item past a bound of 2")
	}
	if v, ok, _ := l.Take(); !ok || v != 2 {
		t.Fatalf("Take = %v, %v; want the last put, 2", v, ok)
	}
	if !l.Put(9, 0) {
		t.Fatal("an unbounded Put refused")
	}
	left := l.Close()
	if len(left) != 2 || left[0] != 1 || left[1] != 9 {
		t.Fatalf("Close returned %v; want [1 9]", left)
	}
	if l.Put(5, 0) {
		t.Fatal("a closed list kept an item")
	}
	if _, ok, closed := l.Take(); ok || !closed {
		t.Fatalf("Take after Close: ok %v closed %v", ok, closed)
	}
	if left := l.Close(); len(left) != 0 {
		t.Fatalf("a second Close returned %v", left)
	}
}

// Every item put is taken or returned by Close exactly once, however Takes,
// Puts and the Close race.
func TestListCloseRaces(t *testing.T) {
	var l List[int]
	const workers, each = 4, 1000
	var mu sync.Mutex
	seen := map[int]int{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				v := w*each + i
				if !l.Put(v, 0) {
					mu.Lock()
					seen[v]++ // refused: the caller's to destroy
					mu.Unlock()
					continue
				}
				if got, ok, _ := l.Take(); ok {
					mu.Lock()
					seen[got]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, v := range l.Close() {
			mu.Lock()
			seen[v]++
			mu.Unlock()
		}
	}()
	wg.Wait()
	for _, v := range l.Close() {
		seen[v]++
	}
	if len(seen) != workers*each {
		t.Fatalf("%d of %d items accounted for", len(seen), workers*each)
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("item %d accounted for %d times", v, n)
		}
	}
}
