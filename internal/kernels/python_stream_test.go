package kernels

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/kernelproto"
)

// pyMessages runs a cell and returns its messages on the channel, in
// order, up to its done.
func pyMessages(t *testing.T, k *localKernel, code string) [][]byte {
	t.Helper()
	k.Send(kernelproto.Execute{Type: kernelproto.TExecute, Cell: k.CellID(), Code: code})
	var lines [][]byte
	for {
		line := k.Read(30 * time.Second)
		lines = append(lines, line)
		var env kernelproto.Envelope
		mustUnmarshal(t, line, &env)
		if env.Type == kernelproto.TDone {
			k.Drain()
			return lines
		}
	}
}

// TestPythonStreamOnChannel: print, display() and print come out on the
// channel in the order the cell made them, 50 times over, each numbered;
// before, prints went to the pipe and displays to the channel, and the
// agent could not tell their order.
func TestPythonStreamOnChannel(t *testing.T) {
	k := startPython(t)
	if k.Ready.Order == "" {
		t.Fatal("the Python kernel announced no order nonce")
	}
	lines := pyMessages(t, k, "import sys\nfor i in range(50):\n    print('a', i)\n    display(i)\n    print('b', i, file=sys.stderr)")
	var got []string
	var last uint64
	for _, line := range lines {
		var env kernelproto.Envelope
		mustUnmarshal(t, line, &env)
		switch env.Type {
		case kernelproto.TStream:
			var m kernelproto.Stream
			mustUnmarshal(t, line, &m)
			got = append(got, m.Name+":"+string(m.Data))
		case kernelproto.TDisplay:
			var d kernelproto.Display
			mustUnmarshal(t, line, &d)
			got = append(got, "display:"+text(t, d))
		default:
			continue
		}
		if env.Seq <= last {
			t.Fatalf("message %s numbered %d after %d", line, env.Seq, last)
		}
		last = env.Seq
	}
	var want []string
	for i := range 50 {
		want = append(want, "stdout:a "+itoa(i)+"\n", "display:"+itoa(i), "stderr:b "+itoa(i)+"\n")
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("messages:\n%q\nwant\n%q", got, want)
	}
	// the pipes got only the marks, which kerneltest strips
	if r := pyOK(k, "print('x', end='')\ndisplay(1)\nprint('y')"); r.Stdout != "xy\n" || len(r.Displays) != 1 {
		t.Errorf("stdout %q displays %d", r.Stdout, len(r.Displays))
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestPythonStdoutObject: sys.stdout and sys.stderr behave as the file
// objects code expects: fileno() 1 and 2 (where output below Python goes),
// not a tty, utf-8, write returns the length, a binary buffer, and
// output below Python (os.system, os.write, a subprocess, a fork) keeps its
// place between prints, as it did when prints went to fd 1.
func TestPythonStdoutObject(t *testing.T) {
	k := startPython(t)
	r := pyOK(k, "import sys\nn = sys.stdout.write('héllo\\n')\nprint(sys.stdout.fileno(), sys.stderr.fileno(), sys.stdout.isatty(), sys.stdout.encoding, n, sys.stdout.writable())\nsys.stdout.buffer.write(b'raw\\xff\\n')\nsys.stdout.flush()\nsys.stdout.reconfigure(errors='replace')\nprint(sys.stdout.errors)")
	if want := "héllo\n1 2 False utf-8 6 True\nraw\xff\nreplace\n"; r.Stdout != want {
		t.Errorf("stdout %q, want %q", r.Stdout, want)
	}
	for _, c := range []struct{ code, want string }{
		{"import os\nprint('a')\nos.system('echo b')\nprint('c')", "a\nb\nc\n"},
		{"import os\nprint('a', end='')\nos.system('echo b')\nprint('c')", "ab\nc\n"},
		{"import os\nprint('a')\nos.write(1, b'b\\n')\nprint('c')", "a\nb\nc\n"},
		{"import subprocess\nprint('a')\nsubprocess.run(['echo', 'b'])\nprint('c')", "a\nb\nc\n"},
		{"import os\nprint('a', end='')\npid = os.fork()\nif pid == 0:\n    print('child')\nelse:\n    os.waitpid(pid, 0)\n    print('parent')", "achild\nparent\n"},
	} {
		for range 10 {
			if r := pyOK(k, c.code); r.Stdout != c.want {
				t.Fatalf("%q: stdout %q, want %q", c.code, r.Stdout, c.want)
			}
		}
	}
}
