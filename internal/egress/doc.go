// Package egress is kiln's egress proxy: the only way out of a sandbox.
//
// The service opens one Session per sandbox and serves it on a unix socket
// that the sandbox reaches through a loopback port in its own network
// namespace. On each connection a Session speaks
//
//   - an HTTP forward proxy (absolute-URI requests) and HTTPS CONNECT, to the
//     hosts on the session's allowlist only;
//   - package mirrors in origin form, /pypi/simple/<project>/ (PEP 503) and
//     /npm/<name>, fetched from the administrator's indexes, with links
//     rewritten to come back through the proxy, and the administrator's
//     package policy checked on every project or package requested;
//   - under the policy "none", a 403 naming the policy for everything.
//
// The proxy resolves names itself (there is no DNS inside the sandbox),
// refuses any address that is loopback, private, link-local, cloud metadata,
// CGNAT, multicast, unspecified, reserved or one of the host's own, and dials
// exactly the address it checked, so DNS rebinding between the check and the
// connection cannot work. It never follows redirects: every request is
// checked on its own. Each connection attempt, allowed or denied, is given to
// the session's record callback once, with its bytes, when it ends.
package egress
