//go:build amd64 || arm64

package seccomp

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
)

// The Docker profile and the native filter allow exactly the same system
// calls: a call the native filter can allow (for some arguments) has an
// allow rule in the profile, and no other call has one.
func TestDockerProfileSameCalls(t *testing.T) {
	raw, err := Docker()
	if err != nil {
		t.Fatal(err)
	}
	var p DockerProfile
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	var nat, docker, nativeEPERM, dockerEPERM, nativeENOSYS, dockerENOSYS []string
	for _, r := range Rules {
		if _, ok := native.nums[r.Name]; !ok {
			continue
		}
		canAllow := r.Action == Allow
		for _, c := range r.Conds {
			canAllow = canAllow || c.Action == Allow
		}
		if canAllow {
			nat = append(nat, r.Name)
		} else if r.Action == EPERM && len(r.Conds) == 0 {
			nativeEPERM = append(nativeEPERM, r.Name)
		} else if r.Action == ENOSYS && len(r.Conds) == 0 {
			nativeENOSYS = append(nativeENOSYS, r.Name)
		}
	}
	for _, s := range p.Syscalls {
		switch s.Action {
		case "SCMP_ACT_ALLOW":
			docker = append(docker, s.Names...)
		case "SCMP_ACT_ERRNO":
			switch {
			case len(s.Args) > 0:
				// EPERM for some arguments only (ioctl's refused
				// requests): TestDockerProfileIoctl checks them.
			case s.ErrnoRet != nil && *s.ErrnoRet == errnoEPERM:
				dockerEPERM = append(dockerEPERM, s.Names...)
			case s.ErrnoRet != nil && *s.ErrnoRet == errnoENOSYS:
				dockerENOSYS = append(dockerENOSYS, s.Names...)
			default:
				t.Errorf("rule %v: errno %v; want EPERM or ENOSYS", s.Names, s.ErrnoRet)
			}
		default:
			t.Errorf("rule %v: action %s", s.Names, s.Action)
		}
	}
	for _, l := range []*[]string{&nat, &docker, &nativeEPERM, &dockerEPERM, &nativeENOSYS, &dockerENOSYS} {
		slices.Sort(*l)
		*l = slices.Compact(*l)
	}
	if !slices.Equal(nat, docker) {
		t.Errorf("allowed calls differ:\nnative %v\ndocker %v", nat, docker)
	}
	if !slices.Equal(nativeEPERM, dockerEPERM) {
		t.Errorf("EPERM calls differ:\nnative %v\ndocker %v", nativeEPERM, dockerEPERM)
	}
	if !slices.Equal(nativeENOSYS, dockerENOSYS) {
		t.Errorf("ENOSYS calls differ:\nnative %v\ndocker %v", nativeENOSYS, dockerENOSYS)
	}
	if p.DefaultAction != "SCMP_ACT_ERRNO" || p.DefaultErrnoRet == nil || *p.DefaultErrnoRet != errnoENOSYS {
		t.Errorf("default %s %v; want ENOSYS as natively", p.DefaultAction, p.DefaultErrnoRet)
	}
}

// A conditional rule without a translation is an error, not a call
// silently allowed or refused.
func TestDockerProfileUntranslatedRule(t *testing.T) {
	rules := append(slices.Clone(Rules), Rule{Name: "kill", Action: Allow, Conds: []Cond{{Checks: []Check{argIn(1, 9)}, Action: EPERM}}})
	rules = slices.DeleteFunc(rules, func(r Rule) bool { return r.Name == "kill" && len(r.Conds) == 0 })
	if _, err := dockerProfile(rules, native, "SCMP_ARCH_X86_64"); err == nil {
		t.Error("a conditional rule for kill was accepted without a translation")
	}
}

// The profile answers ioctl as the native filter does: EPERM for
// TIOCSTI, TIOCLINUX and TIOCSETD, also with high bits set (the kernel
// reads 32), and allows every other request. The rules are read as runc
// and libseccomp apply them: comparisons of one argument within a rule
// become rules of their own, and an unconditional rule of a call hides
// its conditional ones.
func TestDockerProfileIoctl(t *testing.T) {
	raw, err := Docker()
	if err != nil {
		t.Fatal(err)
	}
	var p DockerProfile
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	const hi = 1 << 32
	for _, tc := range []struct {
		req  uint64
		want string
	}{
		{tiocsti, "EPERM"}, {hi | tiocsti, "EPERM"}, {tioclinux, "EPERM"}, {tiocsetd, "EPERM"}, {hi | tiocsetd, "EPERM"},
		{0x5401, "allow"}, {hi | 0x5401, "allow"}, {tiocsti + 1, "allow"}, {tiocsti - 1, "allow"}, {0, "allow"}, {0xffffffff, "allow"}, {0x80045430, "allow"},
	} {
		if got := dockerIoctl(t, p, tc.req); got != tc.want {
			t.Errorf("ioctl request %#x: %s; want %s", tc.req, got, tc.want)
		}
	}
}

// dockerIoctl is the profile's answer to ioctl with request req.
func dockerIoctl(t *testing.T, p DockerProfile, req uint64) string {
	t.Helper()
	var answers []string
	for _, s := range p.Syscalls {
		if !slices.Contains(s.Names, "ioctl") {
			continue
		}
		answer := "allow"
		if s.Action != "SCMP_ACT_ALLOW" {
			answer = "EPERM"
			if s.ErrnoRet == nil || *s.ErrnoRet != errnoEPERM {
				answer = fmt.Sprintf("%s %v", s.Action, s.ErrnoRet)
			}
		}
		if len(s.Args) == 0 {
			return answer // libseccomp keeps only this one
		}
		seen := map[uint]bool{}
		split := false
		for _, a := range s.Args {
			split = split || seen[a.Index]
			seen[a.Index] = true
		}
		matches := 0
		for _, a := range s.Args {
			var v uint64
			if a.Index == 1 {
				v = req
			}
			ok := false
			switch a.Op {
			case "SCMP_CMP_EQ":
				ok = v == a.Value
			case "SCMP_CMP_NE":
				ok = v != a.Value
			case "SCMP_CMP_MASKED_EQ":
				ok = v&a.Value == a.ValueTwo
			default:
				t.Fatalf("ioctl rule with op %s", a.Op)
			}
			if ok {
				matches++
			}
		}
		if (split && matches > 0) || matches == len(s.Args) {
			answers = append(answers, answer)
		}
	}
	slices.Sort(answers)
	answers = slices.Compact(answers)
	if len(answers) != 1 {
		return fmt.Sprintf("%v", answers) // none (the default) or a conflict
	}
	return answers[0]
}
