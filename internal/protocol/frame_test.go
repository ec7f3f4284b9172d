package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	want := Exec{Argv: []string{"python3", "-c", "print(1)"}, Stdin: []byte{0, 1, 255}, TimeoutMs: 5000}
	if err := w.Send(7, TExec, want); err != nil {
		t.Fatal(err)
	}
	if err := w.Send(7, TCancel, nil); err != nil {
		t.Fatal(err)
	}
	r := NewReader(&buf)
	m, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	var got Exec
	if err := m.Decode(&got); err != nil {
		t.Fatal(err)
	}
	if m.ID != 7 || m.Type != TExec {
		t.Errorf("got id %d type %q, want 7 %q", m.ID, m.Type, TExec)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exec body (-want +got):\n%s", diff)
	}
	m, err = r.Read()
	if err != nil || m.Type != TCancel || len(m.Body) != 0 {
		t.Errorf("second message = %+v, %v; want a bodiless cancel", m, err)
	}
	if _, err := r.Read(); err != io.EOF {
		t.Errorf("read at end = %v, want io.EOF", err)
	}
}

func TestReadRejects(t *testing.T) {
	huge := make([]byte, 4)
	binary.BigEndian.PutUint32(huge, MaxFrame+1)
	cut := append([]byte{0, 0, 0, 10}, `{"id":1`...)
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"oversized length", huge, ErrFrameTooLarge},
		{"cut inside frame", cut, io.ErrUnexpectedEOF},
		{"cut inside header", []byte{0, 0}, io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(tc.in)).Read()
			if !errors.Is(err, tc.want) {
				t.Errorf("Read = %v, want %v", err, tc.want)
			}
		})
	}
	for _, body := range []string{`not json`, `{"id":1}`, `[]`} {
		frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		if _, err := NewReader(bytes.NewReader(append(frame, body...))).Read(); err == nil {
			t.Errorf("Read(%q) succeeded, want an error", body)
		}
	}
}

// FuzzRead checks that no input makes the reader panic or return a message
// without a type, and that what it accepts survives a re-encode.
func FuzzRead(f *testing.F) {
	var buf bytes.Buffer
	NewWriter(&buf).Send(1, TStdout, Data{Data: []byte("hi")})
	f.Add(buf.Bytes())
	f.Add([]byte{0, 0, 0, 2, '{', '}'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in))
		for i := 0; i < 8; i++ {
			m, err := r.Read()
			if err != nil {
				return
			}
			if m.Type == "" {
				t.Fatal("accepted a message without a type")
			}
			var out bytes.Buffer
			if err := NewWriter(&out).Send(m.ID, m.Type, m.Body); err != nil {
				t.Fatalf("re-encode: %v", err)
			}
		}
	})
}
