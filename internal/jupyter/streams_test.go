package jupyter

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

type sent struct {
	mu  sync.Mutex
	got []string
}

func (s *sent) send(name, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, name+":"+text)
}

func (s *sent) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.got, "|")
}

// The prompt of input() is shown in the input_request, not in the output,
// as IPython does; the lines before it go out as they are.
func TestStreamsDropThePrompt(t *testing.T) {
	var out sent
	s := newStreams(out.send)
	s.write("stdout", []byte("first line\nYour name: "))
	s.dropPrompt("Your name: ")
	s.write("stdout", []byte("hi Ada\n"))
	s.stop()
	if got := out.String(); got != "stdout:first line\n|stdout:hi Ada\n" {
		t.Errorf("got %q", got)
	}
}

// A UTF-8 character cut between two chunks arrives whole; an unfinished
// line is sent after a short while, and stdout and stderr keep the order
// they were written in.
func TestStreamsKeepCharactersAndOrder(t *testing.T) {
	var out sent
	s := newStreams(out.send)
	euro := []byte("€\n")
	s.write("stdout", euro[:1])
	s.write("stdout", euro[1:])
	s.write("stdout", []byte("partial"))
	s.write("stderr", []byte("err\n"))
	s.write("stdout", []byte("no newline"))
	time.Sleep(3 * holdPartial)
	if got := out.String(); got != "stdout:€\n|stdout:partial|stderr:err\n|stdout:no newline" {
		t.Errorf("got %q", got)
	}
	s.write("stdout", []byte{0xe2, 0x82})
	s.stop()
	if got := out.String(); !strings.HasSuffix(got, "|stdout:\uFFFD") {
		t.Errorf("a character cut at the end of the cell: %q, want U+FFFD", got)
	}
}

// Hostile messages are refused with a reason, never a panic.
func TestParseMessageRefusesGarbage(t *testing.T) {
	for _, c := range []struct {
		name string
		typ  websocket.MessageType
		data string
	}{
		{"not JSON", websocket.MessageText, "{"},
		{"no header", websocket.MessageText, `{"channel": "shell", "content": {}}`},
		{"a header without msg_type", websocket.MessageText, `{"header": {"msg_id": "1"}}`},
		{"a header that is a string", websocket.MessageText, `{"header": "x"}`},
		{"binary, too short", websocket.MessageBinary, "\x00\x00"},
		{"binary, offsets past the end", websocket.MessageBinary, "\x00\x00\x00\x01\xff\xff\xff\xff"},
		{"binary, a huge count", websocket.MessageBinary, "\xff\xff\xff\xff\x00\x00\x00\x08"},
	} {
		if _, err := parseMessage(c.typ, []byte(c.data)); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	m, err := parseMessage(websocket.MessageText, []byte(`{"header": {"msg_id": "1", "msg_type": "kernel_info_request"}}`))
	if err != nil || m.Channel != "shell" || string(m.Content) != "{}" {
		t.Errorf("a minimal message: %+v %v (want shell, content {})", m, err)
	}
}

func FuzzParseMessage(f *testing.F) {
	f.Add([]byte(`{"header": {"msg_id": "1", "msg_type": "x"}}`), true)
	f.Add([]byte("\x00\x00\x00\x02\x00\x00\x00\x0c\x00\x00\x00\x0e{}"), false)
	f.Fuzz(func(t *testing.T, data []byte, text bool) {
		typ := websocket.MessageBinary
		if text {
			typ = websocket.MessageText
		}
		parseMessage(typ, data)
	})
}

func TestKernelIDRoundTrip(t *testing.T) {
	sid := "0123456789abcdef0123456789abcdef"
	id := kernelID(sid)
	if id != "01234567-89ab-cdef-0123-456789abcdef" {
		t.Fatalf("kernelID = %q", id)
	}
	if back, err := sessionOf(strings.ToUpper(id)); err != nil || back != sid {
		t.Errorf("sessionOf(%q) = %q, %v", id, back, err)
	}
	for _, bad := range []string{"", "x", "../../etc", sid + "00"} {
		if _, err := sessionOf(bad); err == nil {
			t.Errorf("sessionOf(%q): no error", bad)
		}
	}
}

func TestVersionNumber(t *testing.T) {
	for line, want := range map[string]string{"Python 3.11.2": "3.11.2", "v20.20.2": "20.20.2",
		"GNU bash, version 5.2.15(1)-release (x86_64-pc-linux-gnu)": "5.2.15", "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)": "15.18"} {
		if got := versionNumber.FindString(line); got != want {
			t.Errorf("%q: %q, want %q", line, got, want)
		}
	}
}
