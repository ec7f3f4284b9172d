package egress

import "time"

// Record kinds.
const (
	KindConnect = "connect" // an HTTPS CONNECT tunnel
	KindHTTP    = "http"    // a plain HTTP request through the forward proxy
	KindPyPI    = "pypi"    // a request to the pip mirror
	KindNPM     = "npm"     // a request to the npm mirror
)

// Record is one connection attempt.
type Record struct {
	Time      time.Time `json:"time"`
	Host      string    `json:"host"`
	Port      int       `json:"port"`
	Addr      string    `json:"addr,omitempty"` // the IP actually dialled
	Kind      string    `json:"kind"`           // "connect", "http", "pypi", "npm"
	Allowed   bool      `json:"allowed"`
	Reason    string    `json:"reason,omitempty"` // why denied, e.g. "not on the allowlist", "resolves to a private address 10.0.0.1", "network policy is none"
	BytesUp   int64     `json:"bytes_up"`
	BytesDown int64     `json:"bytes_down"`

	// Package is the project (pip) or package (npm) a mirror request was
	// for; empty for the forward proxy.
	Package string `json:"package,omitempty"`
	// Cached says a mirror download was served from the shared cache
	// without contacting the upstream.
	Cached bool `json:"cached,omitempty"`
}
