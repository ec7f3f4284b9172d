//go:build amd64 || arm64

package seccomp

import (
	"encoding/json"
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
