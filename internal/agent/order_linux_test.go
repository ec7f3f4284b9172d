package agent

import (
	"bytes"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"
)

// TestFenceWithOrderMarks: with a kernel that marks its pipes (the
// Python kernel's nonce starts with a NUL byte), every fence at the end of
// a cell is passed at once and all output before it reaches the cell, a
// trailing NUL included. A fence marker ending in the nonce's first byte
// was held back as the possible start of an order mark, and the cell
// waited out the fence's 5 s: one warm cell in about 128, 25 ms a cell on
// average (BenchmarkWarmCellHTTP).
func TestFenceWithOrderMarks(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	nonce := append([]byte{0}, bytes.Repeat([]byte{0xa5}, 15)...)
	o := newOrder()
	o.start([]byte(`{"type":"ready","language":"python","version":"3","order":"` + hex.EncodeToString(nonce) + `"}`))
	if o.marks() == nil {
		t.Fatal("the order nonce of Ready was not taken")
	}
	s := newStream(r, w, o, 0)
	defer s.close()

	var mu sync.Mutex
	var got []byte
	sink := func(p []byte) {
		mu.Lock()
		got = append(got, p...)
		mu.Unlock()
	}
	// Each fence has a fresh random marker: 3000 of them meet a marker
	// ending in any one byte value with a probability of 1 - 1e-5.
	for i := range 3000 {
		mu.Lock()
		got = got[:0]
		mu.Unlock()
		s.attach(sink)
		out := []byte{'x', byte(i), 0} // what the cell wrote, ending in NUL
		if _, err := w.Write(out); err != nil {
			t.Fatal(err)
		}
		seen, err := s.fence()
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-seen:
		case <-time.After(2 * time.Second):
			t.Fatalf("fence %d not passed within 2 s: the pump held its marker back", i)
		}
		mu.Lock()
		if !bytes.Equal(got, out) {
			t.Fatalf("fence %d: the cell got %q, want %q", i, got, out)
		}
		mu.Unlock()
	}
}
