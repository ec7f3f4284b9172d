package backend

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// TestMade: what a backend made is found by id and listed sorted until it
// is destroyed; a failed destroy keeps it (listed, to retry); destroying an
// unknown or destroyed id is not an error; a lookup of one says NotFound.
func TestMade(t *testing.T) {
	var m Made[*int]
	one, two := new(int), new(int)
	m.Add("b", two)
	m.Add("a", one)
	if got := m.List(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("List = %q, want [a b]", got)
	}
	if sb, err := m.Get("a"); err != nil || sb != one {
		t.Errorf("Get(a) = %p, %v; want the one added", sb, err)
	}
	if _, err := m.Get("zz"); kiln.KindOf(err) != kiln.NotFound {
		t.Errorf("Get(zz) = %v, want NotFound", err)
	}
	boom := errors.New("busy")
	if err := m.Destroy("a", func(*int) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("a failed destroy = %v, want its error", err)
	}
	if got := m.List(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("after a failed destroy List = %q, want a still there", got)
	}
	var destroyed []*int
	for _, id := range []string{"a", "a", "nope"} {
		if err := m.Destroy(id, func(sb *int) error { destroyed = append(destroyed, sb); return nil }); err != nil {
			t.Errorf("Destroy(%s) = %v, want nil", id, err)
		}
	}
	if len(destroyed) != 1 || destroyed[0] != one || !slices.Equal(m.List(), []string{"b"}) {
		t.Errorf("destroyed %v, left %q; want a destroyed once and b left", destroyed, m.List())
	}
}

// TestMadeConcurrent: many goroutines add, look up and destroy at once
// and every sandbox is destroyed exactly once.
func TestMadeConcurrent(t *testing.T) {
	var m Made[int]
	var mu sync.Mutex
	count := map[int]int{}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := string(rune('A' + i))
			m.Add(id, i)
			m.Get(id)
			for range 2 {
				m.Destroy(id, func(n int) error { mu.Lock(); count[n]++; mu.Unlock(); return nil })
			}
		}()
	}
	wg.Wait()
	if len(m.List()) != 0 || len(count) != 50 {
		t.Fatalf("left %q, destroyed %d; want none left and 50 destroyed", m.List(), len(count))
	}
	for n, c := range count {
		if c != 1 {
			t.Errorf("sandbox %d destroyed %d times, want once", n, c)
		}
	}
}
