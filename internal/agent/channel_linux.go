package agent

import (
	"bufio"
	"errors"
	"fmt"

	"github.com/kiln-dev/kiln/internal/protocol"
)

// What the agent holds of a kernel's channel (fd 3) is bounded, whatever
// user code writes there: the channel belongs to the kernel's process, so
// the cell's code can write to it too. A line longer than lineCap is
// dropped as it is read, never held whole; at most linesQueued lines wait
// for the running cell, and past them the kernel's writes block. The agent
// lives in a cgroup of its own with a small memory limit, and must never
// be the one that runs out.
const (
	// lineCap is the longest line taken from a kernel: the most that fits
	// in one frame to the service, with room for the frame's envelope.
	lineCap = protocol.MaxFrame - 64<<10
	// linesQueued is how many lines wait between the reader and the cell.
	linesQueued = 4
)

// tOverlong is the agent's own stand-in for a line it dropped: the cell is
// charged its size. A kernel that sends one only charges itself.
const tOverlong = "kiln_overlong"

// overlong is a line the agent dropped, or the part of one dropped so far.
type overlong struct {
	Type string `json:"type"`
	Size int64  `json:"size"`
}

func overlongLine(n int) []byte {
	return fmt.Appendf(nil, `{"type":%q,"size":%d}`+"\n", tOverlong, n)
}

// read turns the channel into lines for k.lines. A line longer than
// lineCap becomes overlong reports instead, one for each lineCap bytes
// dropped and one at its end, so that a line without an end still counts
// against the cell's output limit as it grows.
func (k *kernel) read() {
	defer close(k.lines)
	r := bufio.NewReaderSize(k.conn, 64<<10)
	var line []byte
	skipping, dropped := false, 0
	for {
		frag, err := r.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
		end := err == nil
		if !skipping && len(line)+len(frag) > lineCap {
			skipping, dropped, line = true, len(line), nil
		}
		if !skipping {
			line = append(line, frag...)
			if end {
				k.lines <- line
				line = nil
			}
			continue
		}
		dropped += len(frag)
		if end || dropped >= lineCap {
			k.lines <- overlongLine(dropped)
			dropped = 0
		}
		skipping = !end
	}
}
