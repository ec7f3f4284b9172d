package kiln

import (
	"encoding/json"
	"time"
)

// Network policy modes (package egress enforces them).
const (
	NetworkNone      = "none"      // no network at all: the default
	NetworkAllowlist = "allowlist" // only the listed hosts, through kiln's egress proxy
)

// NetworkPolicy is a session's network policy: the mode and, for an
// allowlist, the hosts ("example.com", "*.example.com", with an optional
// ":port"; no port means 80 and 443). Package egress checks and enforces
// it. In JSON it is {"mode": ..., "allow": [...]}; a bare string is read
// as the mode, which is what clients sent when "none" was the only one.
type NetworkPolicy struct {
	Mode  string   `json:"mode"`
	Allow []string `json:"allow,omitempty"`
}

// UnmarshalJSON takes the object or a bare mode string.
func (p *NetworkPolicy) UnmarshalJSON(b []byte) error {
	var mode string
	if json.Unmarshal(b, &mode) == nil {
		*p = NetworkPolicy{Mode: mode}
		return nil
	}
	type plain NetworkPolicy
	var v plain
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = NetworkPolicy(v)
	return nil
}

// Normal is the policy with "" read as "none".
func (p NetworkPolicy) Normal() NetworkPolicy {
	if p.Mode == "" {
		p.Mode = NetworkNone
	}
	if p.Allow == nil {
		p.Allow = []string{}
	}
	return p
}

// EgressRecord is one connection attempt of a sandbox through kiln's
// egress proxy: where to, allowed or denied and why, and bytes each way.
type EgressRecord struct {
	Time      time.Time `json:"time"`
	Host      string    `json:"host"`
	Port      int       `json:"port"`
	Addr      string    `json:"addr,omitempty"` // the IP the proxy dialled
	Kind      string    `json:"kind"`           // connect, http, pypi, npm
	Allowed   bool      `json:"allowed"`
	Reason    string    `json:"reason,omitempty"` // why it was denied
	BytesUp   int64     `json:"bytes_up"`
	BytesDown int64     `json:"bytes_down"`
	Package   string    `json:"package,omitempty"` // the project or package of a mirror request
	Cached    bool      `json:"cached,omitempty"`  // a mirror download served from the shared cache
}

// MaxCellEgress bounds the egress records a cell's result carries.
const MaxCellEgress = 1000
