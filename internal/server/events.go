package server

import (
	"unicode/utf8"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/service"
)

// eventSink turns a cell's callbacks into client events, for SSE and the
// WebSocket alike.
type eventSink func(client.Event)

// execEvents are the callbacks of one cell; started commits the stream
// (a queued event comes before the execution exists). Stream chunks may end inside
// a UTF-8 character; the tail waits for the next chunk so that JSON never
// carries half a character (which it would turn into U+FFFD).
func (send eventSink) execEvents(started func()) service.ExecEvents {
	return service.ExecEvents{
		Queued: func(p service.Place) {
			started()
			send(client.Event{Type: client.EventQueued, Position: p.Position, Reason: p.Reason})
		},
		Started: func(e kiln.Execution) {
			started()
			x := fromExecution(e)
			send(client.Event{Type: client.EventStarted, Execution: &x})
		},
		Events: kiln.CellEvents{
			Stdout: send.text(client.EventStdout),
			Stderr: send.text(client.EventStderr),
			Output: func(o kiln.Output) { send(client.Event{Type: client.EventDisplay, Output: &o}) },
			Input: func(prompt string, password bool) {
				send(client.Event{Type: client.EventInputRequest, Prompt: prompt, Password: password})
			},
		},
	}
}

// text sends one stream's chunks, holding back an incomplete character.
func (send eventSink) text(typ string) func([]byte) {
	var tail []byte
	return func(p []byte) {
		buf := append(tail, p...)
		cut := completeUTF8(buf)
		tail = append([]byte(nil), buf[cut:]...)
		if cut > 0 {
			send(client.Event{Type: typ, Data: string(buf[:cut])})
		}
	}
}

// completeUTF8 is the length of p without an incomplete character at its
// end (at most 3 bytes are held back).
func completeUTF8(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				return i
			}
			return len(p)
		}
	}
	return len(p)
}
