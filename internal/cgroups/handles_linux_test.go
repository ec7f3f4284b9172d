package cgroups

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// FromSpec rebuilds working Handles from descriptor numbers, as in the
// sandbox, and keeps them from leaking into programs it execs.
func TestFromSpecRoundTrip(t *testing.T) {
	h, fake := newV1Fake(t)
	g, err := h.Create("sb-1", testLimits, agentLimits)
	if err != nil {
		t.Fatal(err)
	}
	fake.set(t, "sys/fs/cgroup/pids/kiln/sb-1/user/pids.events", "max 7\n")
	hs, err := g.OpenHandles()
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()

	// Inherited descriptors are plain numbers without close-on-exec: dup the
	// host's files to get such numbers, in Files order.
	var fds []int
	for _, f := range hs.Files() {
		fd, err := unix.Dup(int(f.Fd()))
		must(t, err)
		fds = append(fds, fd)
	}
	spec := HandleSpec{Version: V1, Procs: fds[:4], Peak: fds[4], OOM: fds[5], Pids: fds[6], CPU: fds[7]}
	child, err := FromSpec(spec)
	if err != nil {
		t.Fatalf("FromSpec(%+v): %v", spec, err)
	}
	defer child.Close()

	for _, fd := range fds {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		must(t, err)
		if flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("descriptor %d is not close-on-exec after FromSpec", fd)
		}
	}
	want, err := hs.Usage()
	must(t, err)
	got, err := child.Usage()
	must(t, err)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Usage through FromSpec handles (-host +child):\n%s", diff)
	}
	if got.PidsLimitHits != 7 {
		t.Errorf("PidsLimitHits = %d, want 7", got.PidsLimitHits)
	}
}
