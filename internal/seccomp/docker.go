package seccomp

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// DockerProfile is a container engine's seccomp profile (the JSON that
// Docker takes in --security-opt seccomp=...), generated from Rules for
// one architecture so that a container gets the calls the native filter
// allows, and no others.
//
// libseccomp's rules are not the filter's ordered conditions: a call is
// allowed when any of its rules matches. So each conditional rule of the
// table is translated by hand below into the argument values it allows
// (a new conditional rule is an error until it is translated), and what
// the native filter answers with another errno than EPERM (EAFNOSUPPORT
// for a socket family, EPERM for clone with namespace flags) is the
// default here. A call the table does not name gets the default action, ENOSYS,
// on an engine that honours defaultErrnoRet, and EPERM on one that does
// not (Engine 20.10); the calls the table names get their own errno. The set of calls that can be allowed is the same;
// TestDockerProfileSameCalls checks it.
type DockerProfile struct {
	DefaultAction   string          `json:"defaultAction"`
	DefaultErrnoRet *uint           `json:"defaultErrnoRet,omitempty"`
	Architectures   []string        `json:"architectures"`
	Syscalls        []DockerSyscall `json:"syscalls"`
}

// DockerSyscall is one rule of a DockerProfile.
type DockerSyscall struct {
	Names    []string    `json:"names"`
	Action   string      `json:"action"`
	ErrnoRet *uint       `json:"errnoRet,omitempty"`
	Args     []DockerArg `json:"args,omitempty"`
}

// DockerArg compares one argument; all of a rule's must hold.
type DockerArg struct {
	Index    uint   `json:"index"`
	Value    uint64 `json:"value"`
	ValueTwo uint64 `json:"valueTwo"`
	Op       string `json:"op"`
}

func errno(n uint) *uint { return &n }

// dockerProfile builds the profile of rules for architecture a, named
// for libseccomp as scmpArch.
func dockerProfile(rules []Rule, a arch, scmpArch string) (DockerProfile, error) {
	p := DockerProfile{DefaultAction: "SCMP_ACT_ERRNO", DefaultErrnoRet: errno(errnoENOSYS), Architectures: []string{scmpArch}}
	var allowed, eperm, enosys []string
	for _, r := range rules {
		if _, ok := a.nums[r.Name]; !ok {
			continue // absent on this architecture
		}
		if len(r.Conds) > 0 {
			s, err := dockerConditional(r)
			if err != nil {
				return DockerProfile{}, err
			}
			p.Syscalls = append(p.Syscalls, s...)
			continue
		}
		switch r.Action {
		case Allow:
			allowed = append(allowed, r.Name)
		case EPERM:
			eperm = append(eperm, r.Name)
		case DefaultAction:
			// Named too: an engine that ignores defaultErrnoRet (Engine
			// 20.10 does) answers EPERM by default, and glibc falls back
			// from clone3 to clone only on ENOSYS.
			enosys = append(enosys, r.Name)
		default:
			return DockerProfile{}, fmt.Errorf("seccomp: no Docker action for %s's %v", r.Name, r.Action)
		}
	}
	slices.Sort(allowed)
	slices.Sort(eperm)
	slices.Sort(enosys)
	p.Syscalls = append([]DockerSyscall{
		{Names: allowed, Action: "SCMP_ACT_ALLOW"},
		{Names: eperm, Action: "SCMP_ACT_ERRNO", ErrnoRet: errno(errnoEPERM)},
		{Names: enosys, Action: "SCMP_ACT_ERRNO", ErrnoRet: errno(errnoENOSYS)},
	}, p.Syscalls...)
	return p, nil
}

// dockerConditional translates the table's conditional rules: the rules
// below allow exactly the argument values the native filter allows.
func dockerConditional(r Rule) ([]DockerSyscall, error) {
	allow := func(args ...DockerArg) DockerSyscall {
		return DockerSyscall{Names: []string{r.Name}, Action: "SCMP_ACT_ALLOW", Args: args}
	}
	eq := func(i uint, v uint64) DockerArg { return DockerArg{Index: i, Value: v, Op: "SCMP_CMP_EQ"} }
	masked := func(i uint, mask, v uint64) DockerArg {
		return DockerArg{Index: i, Value: mask, ValueTwo: v, Op: "SCMP_CMP_MASKED_EQ"}
	}
	switch r.Name {
	case "clone": // no namespace flag
		return []DockerSyscall{allow(masked(0, cloneNewNamespace, 0))}, nil
	case "personality":
		return []DockerSyscall{allow(eq(0, perLinux)), allow(eq(0, perQuery))}, nil
	case "socket", "socketpair":
		out := []DockerSyscall{allow(eq(0, afUnix)), allow(eq(0, afNetlink), eq(2, netlinkRoute))}
		for _, fam := range []uint64{afInet, afInet6} {
			for t := uint64(0); t <= sockTypeMask; t++ {
				if t != sockRaw && t != sockPacket {
					out = append(out, allow(eq(0, fam), masked(1, sockTypeMask, t)))
				}
			}
		}
		return out, nil
	case "ioctl":
		// Every request but the three the native filter refuses, which
		// get its EPERM. Not an allow rule with three SCMP_CMP_NE on
		// argument 1: runc makes each comparison on one argument a rule
		// of its own, and "not TIOCSTI or not TIOCLINUX" holds for every
		// request. Nor an unconditional allow beside the EPERM rules:
		// libseccomp drops conditional rules of a call that has one. The
		// kernel reads the request as 32 bits, so every comparison masks
		// the high bits off, as the native filter does.
		refused := []uint64{tiocsti, tioclinux, tiocsetd}
		var out []DockerSyscall
		for _, a := range notIn32(1, refused) {
			out = append(out, allow(a))
		}
		for _, req := range refused {
			out = append(out, DockerSyscall{Names: []string{r.Name}, Action: "SCMP_ACT_ERRNO", ErrnoRet: errno(errnoEPERM),
				Args: []DockerArg{masked(1, 0xffffffff, req)}})
		}
		return out, nil
	}
	return nil, fmt.Errorf("seccomp: the conditional rule for %s has no Docker translation (add one in docker.go)", r.Name)
}

// notIn32 are masked comparisons of argument i, one a rule, that together
// hold for exactly the 32-bit values not in vals: walking the bits from
// the top, each branch off the values' prefixes that leads to none of
// them is one comparison of the bits down to the branch.
func notIn32(i uint, vals []uint64) []DockerArg {
	var out []DockerArg
	prefixes := map[uint64]bool{0: true} // the values' bits above bit
	for bit := 31; bit >= 0; bit-- {
		next := map[uint64]bool{}
		for _, v := range vals {
			next[(v&0xffffffff)>>bit] = true
		}
		for _, p := range slices.Sorted(maps.Keys(prefixes)) {
			for _, c := range []uint64{p << 1, p<<1 | 1} {
				if !next[c] {
					mask := uint64(0xffffffff) >> bit << bit
					out = append(out, DockerArg{Index: i, Value: mask, ValueTwo: c << bit, Op: "SCMP_CMP_MASKED_EQ"})
				}
			}
		}
		prefixes = next
	}
	return out
}

// MarshalDockerProfile is p as JSON.
func MarshalDockerProfile(p DockerProfile) ([]byte, error) { return json.Marshal(p) }
