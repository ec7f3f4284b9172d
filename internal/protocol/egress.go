package protocol

// The sandbox's only way out is kiln's egress proxy (package egress, on
// the host). The host binds the proxy session's unix socket at
// EgressSocketPath; the agent listens on EgressProxyAddr in the sandbox's
// network namespace and copies each connection to that socket. User code
// reaches the proxy through the environment (EgressEnv), never the socket
// itself, which only the sandbox's root may connect to.
const (
	EgressSocketPath = "/run/kiln/egress.sock"
	EgressProxyAddr  = "127.0.0.1:3128"
)

// EgressEnv is the environment that points HTTP clients and the package
// managers at the proxy. Caches and logs of the package managers go to
// /tmp, out of the workspace.
var EgressEnv = []string{
	"HTTP_PROXY=http://" + EgressProxyAddr,
	"HTTPS_PROXY=http://" + EgressProxyAddr,
	"http_proxy=http://" + EgressProxyAddr,
	"https_proxy=http://" + EgressProxyAddr,
	"NO_PROXY=localhost,127.0.0.1",
	"no_proxy=localhost,127.0.0.1",
	"PIP_INDEX_URL=http://" + EgressProxyAddr + "/pypi/simple/",
	"PIP_RETRIES=0",
	"PIP_DEFAULT_TIMEOUT=10",
	"PIP_CACHE_DIR=/tmp/.cache/pip",
	"npm_config_registry=http://" + EgressProxyAddr + "/npm/",
	"npm_config_fetch_retries=0",
	"npm_config_cache=/tmp/.cache/npm",
	"npm_config_logs_dir=/tmp/.cache/npm/_logs",
	"npm_config_update_notifier=false",
	"npm_config_fund=false",
	"npm_config_audit=false",
}
