//go:build amd64 || arm64

package seccomp

import "testing"

// evaluate is the policy read directly from the table, with no compiler in
// between: the reference the filter is fuzzed against.
func evaluate(rules []Rule, a arch, d seccompData) Action {
	if d.arch != a.audit {
		return KillProcess
	}
	if a.x32 && d.nr&x32Bit != 0 {
		return KillProcess
	}
	for _, r := range rules {
		if n, ok := a.nums[r.Name]; !ok || n != d.nr {
			continue
		}
	conds:
		for _, c := range r.Conds {
			for _, ch := range c.Checks {
				if !ch.Holds(d.args[ch.Arg]) {
					continue conds
				}
			}
			return c.Action
		}
		return r.Action
	}
	return DefaultAction
}

func FuzzProgram(f *testing.F) {
	vm := newVM(f)
	add := func(nr, arch uint32, args ...uint64) {
		var a [6]uint64
		copy(a[:], args)
		f.Add(nr, arch, a[0], a[1], a[2], a[3], a[4], a[5])
	}
	for _, name := range []string{"read", "clone", "socket", "socketpair", "ioctl", "personality", "clone3", "mount"} {
		n := nr(f, name)
		add(n, native.audit)
		add(n, native.audit, 0x10000000, afNetlink, netlinkRoute)
		add(n, native.audit, afInet, sockRaw, 1)
		add(n, native.audit, afNetlink, 3, 9)
		add(n, native.audit, 0, tiocsti)
		add(n, native.audit, 0xffff_ffff_ffff_ffff, 0xffff_ffff_0000_5412)
		add(n, 0x40000003)
	}
	add(999, native.audit)
	add(x32Bit|nr(f, "read"), native.audit)
	add(0xffffffff, native.audit)

	f.Fuzz(func(t *testing.T, nr, arch uint32, a0, a1, a2, a3, a4, a5 uint64) {
		d := seccompData{nr: nr, arch: arch, args: [6]uint64{a0, a1, a2, a3, a4, a5}}
		if got, want := verdict(t, vm, d), evaluate(Rules, native, d); got != want {
			t.Errorf("%+v: filter says %v, table says %v", d, got, want)
		}
	})
}
