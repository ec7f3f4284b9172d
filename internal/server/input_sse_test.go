package server

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSSEInputRequest: the engine's input callback becomes an SSE event
// named input_request whose data carries the prompt.
func TestSSEInputRequest(t *testing.T) {
	rec := httptest.NewRecorder()
	s := newSSE(rec)
	defer s.close()
	ev := eventSink(s.send).execEvents(func() {})
	ev.Events.Input("Name: ", false)
	ev.Events.Input("PIN: ", true)
	want := "event: input_request\ndata: {\"type\":\"input_request\",\"prompt\":\"Name: \"}\n\n" +
		"event: input_request\ndata: {\"type\":\"input_request\",\"prompt\":\"PIN: \",\"password\":true}\n\n"
	if got := rec.Body.String(); !strings.Contains(got, want) {
		t.Errorf("stream %q lacks %q", got, want)
	}
}
