package egress

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Policy modes.
const (
	ModeNone      = "none"
	ModeAllowlist = "allowlist"
)

// Bounds on a policy, so that a hostile request cannot make matching slow.
const (
	MaxAllowEntries = 256
	maxHostLen      = 253
)

// Policy is one session's network policy. JSON as in the API.
type Policy struct {
	Mode  string   `json:"mode"`            // "none" (default, also for "") or "allowlist"
	Allow []string `json:"allow,omitempty"` // "example.com", "*.example.com", "api.example.com:8443" (no port = 80 and 443)
}

// None is the default policy: no network at all.
var None = Policy{Mode: ModeNone}

// mode is the policy's mode with "" read as "none".
func (p Policy) mode() string {
	if p.Mode == "" {
		return ModeNone
	}
	return p.Mode
}

// IsNone says whether the policy allows no network at all.
func (p Policy) IsNone() bool { return p.mode() == ModeNone }

// entry is one parsed allowlist entry.
type entry struct {
	host     string // lower case, without "*." and without a trailing dot
	wildcard bool   // "*.host": subdomains of host only, not host itself
	port     int    // 0: 80 and 443
}

func (e entry) String() string {
	s := e.host
	if e.wildcard {
		s = "*." + s
	}
	if e.port != 0 {
		s += ":" + strconv.Itoa(e.port)
	}
	return s
}

// ports are the ports an entry allows.
func (e entry) ports() []int {
	if e.port == 0 {
		return []int{80, 443}
	}
	return []int{e.port}
}

// matchHost says whether host (lower case, no trailing dot) is covered.
func (e entry) matchHost(host string) bool {
	if e.wildcard {
		return strings.HasSuffix(host, "."+e.host)
	}
	return host == e.host
}

const allowedForms = `allowed forms are "example.com", "*.example.com" (its subdomains) and either with ":port" (1-65535; no port means 80 and 443)`

// parseEntry parses one allowlist entry, or says what is wrong with it.
func parseEntry(s string) (entry, error) {
	var e entry
	raw := s
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return e, kiln.Errorf(kiln.Invalid, "network policy: an allow entry is empty; %s", allowedForms)
	}
	if len(s) > maxHostLen+8 {
		return e, kiln.Errorf(kiln.Invalid, "network policy: allow entry %.40q... is longer than %d characters", raw, maxHostLen+8)
	}
	if strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@ ") {
		return e, kiln.Errorf(kiln.Invalid, "network policy: allow entry %q is not a host name (no scheme, path, user or spaces); %s", raw, allowedForms)
	}
	host := s
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		if strings.Count(s, ":") > 1 || strings.HasPrefix(s, "[") {
			return e, kiln.Errorf(kiln.Invalid, "network policy: allow entry %q: IP addresses are not allowed, only domain names; %s", raw, allowedForms)
		}
		port, err := strconv.Atoi(s[i+1:])
		if err != nil || port < 1 || port > 65535 {
			return e, kiln.Errorf(kiln.Invalid, "network policy: allow entry %q has a bad port %q; ports are 1-65535", raw, s[i+1:])
		}
		e.port, host = port, s[:i]
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		e.wildcard, host = true, rest
	}
	host = strings.TrimSuffix(host, ".")
	if _, err := netip.ParseAddr(host); err == nil {
		return e, kiln.Errorf(kiln.Invalid, "network policy: allow entry %q: IP addresses are not allowed, only domain names; %s", raw, allowedForms)
	}
	if err := checkHostName(host); err != nil {
		return e, kiln.Errorf(kiln.Invalid, "network policy: allow entry %q: %v; %s", raw, err, allowedForms)
	}
	if e.wildcard && !strings.Contains(host, ".") {
		return e, kiln.Errorf(kiln.Invalid, "network policy: allow entry %q would allow a whole top-level domain; name at least two labels after \"*.\"", raw)
	}
	e.host = host
	return e, nil
}

// checkHostName checks a lower-case DNS name: labels of letters, digits,
// '-' and '_', 1-63 characters each, not starting or ending with '-'.
func checkHostName(host string) error {
	if host == "" {
		return fmt.Errorf("the host name is empty")
	}
	if len(host) > maxHostLen {
		return fmt.Errorf("the host name is longer than %d characters", maxHostLen)
	}
	for label := range strings.SplitSeq(host, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("a label of the host name is empty or longer than 63 characters")
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("a label of the host name starts or ends with '-'")
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("the host name has the character %q; only letters, digits, '-', '_' and '.' are allowed", c)
			}
		}
	}
	return nil
}

// Validate says what is wrong with the policy, as a kiln.Invalid error that
// names what is allowed, or returns nil.
func (p Policy) Validate() error {
	_, err := p.entries()
	return err
}

// entries validates the policy and parses its allowlist.
func (p Policy) entries() ([]entry, error) {
	switch p.mode() {
	case ModeNone:
		if len(p.Allow) > 0 {
			return nil, kiln.Errorf(kiln.Invalid, "network policy: mode %q allows nothing, so it takes no allow list; use mode %q to allow hosts", ModeNone, ModeAllowlist)
		}
		return nil, nil
	case ModeAllowlist:
	default:
		return nil, kiln.Errorf(kiln.Invalid, "network policy: unknown mode %q; the modes are %q (no network) and %q (only the hosts in allow)", p.Mode, ModeNone, ModeAllowlist)
	}
	if len(p.Allow) > MaxAllowEntries {
		return nil, kiln.Errorf(kiln.Invalid, "network policy: %d allow entries, more than the %d allowed", len(p.Allow), MaxAllowEntries)
	}
	es := make([]entry, 0, len(p.Allow))
	for _, s := range p.Allow {
		e, err := parseEntry(s)
		if err != nil {
			return nil, err
		}
		es = append(es, e)
	}
	return es, nil
}

// Within returns a kiln.Forbidden error if p allows anything that ceiling
// does not. An invalid p gives its Validate error; an invalid ceiling allows
// nothing.
func (p Policy) Within(ceiling Policy) error {
	es, err := p.entries()
	if err != nil {
		return err
	}
	if len(es) == 0 && p.mode() == ModeNone {
		return nil
	}
	ces, err := ceiling.entries()
	if err != nil || ceiling.mode() == ModeNone {
		return kiln.Errorf(kiln.Forbidden, "network policy: the server's ceiling is %q, so a session may not use %q; only an administrator may allow more", ModeNone, ModeAllowlist)
	}
	for _, e := range es {
		for _, port := range e.ports() {
			if !slices.ContainsFunc(ces, func(c entry) bool { return c.covers(e, port) }) {
				return kiln.Errorf(kiln.Forbidden, "network policy: %q (port %d) is not within the server's ceiling %s; only an administrator may allow more", e.String(), port, describe(ceiling))
			}
		}
	}
	return nil
}

// covers says whether c allows every host e names on port.
func (c entry) covers(e entry, port int) bool {
	if !slices.Contains(c.ports(), port) {
		return false
	}
	if !c.wildcard {
		return !e.wildcard && e.host == c.host
	}
	// "*.a.com" covers "b.a.com", "*.b.a.com" and "*.a.com".
	return e.host == c.host && e.wildcard || strings.HasSuffix(e.host, "."+c.host)
}

// allows says whether the policy allows host:port. host is lower case
// without a trailing dot.
func allows(es []entry, host string, port int) bool {
	for _, e := range es {
		if e.matchHost(host) && slices.Contains(e.ports(), port) {
			return true
		}
	}
	return false
}

// describe is a short human form of a policy for messages.
func describe(p Policy) string {
	if p.IsNone() {
		return `"none"`
	}
	if len(p.Allow) == 0 {
		return `"allowlist" (empty)`
	}
	s := strings.Join(p.Allow, ", ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return `"allowlist" (` + s + `)`
}
