package egress

import (
	"net"
	"net/netip"
)

// forbidden are the address ranges the proxy never connects to, with what
// the reason calls them. Order matters: the first match names the class
// (the metadata address before the link-local range that holds it).
var forbidden = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("169.254.169.254/32"), "a cloud metadata"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "a cloud metadata"},
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (CGNAT)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "a reserved"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a reserved"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved"},
	{netip.MustParsePrefix("::/128"), "an unspecified"},
	{netip.MustParsePrefix("::1/128"), "a loopback"},
	{netip.MustParsePrefix("::/96"), "a reserved (IPv4-compatible)"},
	{netip.MustParsePrefix("100::/64"), "a reserved"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a reserved (local NAT64)"},
	{netip.MustParsePrefix("2001::/32"), "a reserved (Teredo)"},
	{netip.MustParsePrefix("fc00::/7"), "a private"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local"},
	{netip.MustParsePrefix("fec0::/10"), "a private (site-local)"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast"},
}

var (
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4  = netip.MustParsePrefix("2002::/16")
	mapped4 = netip.MustParsePrefix("::ffff:0:0/96")
)

// classify says what kind of forbidden address ip is ("a private"), or ""
// if the proxy may connect to it. IPv4-mapped, NAT64 and 6to4 addresses are
// judged by the IPv4 address they carry.
func classify(ip netip.Addr) string {
	if mapped4.Contains(ip) {
		ip = ip.Unmap()
	}
	for _, f := range forbidden {
		if f.prefix.Contains(ip) {
			return f.what
		}
	}
	b := ip.As16()
	switch {
	case nat64.Contains(ip):
		return classify(netip.AddrFrom4([4]byte(b[12:16])))
	case sixTo4.Contains(ip):
		return classify(netip.AddrFrom4([4]byte(b[2:6])))
	}
	return ""
}

// checkAddr returns why the proxy may not connect to ip, or "".
func (p *Proxy) checkAddr(ip netip.Addr) string {
	ip = ip.Unmap()
	if what := classify(ip); what != "" {
		return "resolves to " + what + " address " + ip.String()
	}
	for _, own := range p.hostAddrs() {
		if a, ok := netip.AddrFromSlice(own); ok && a.Unmap() == ip {
			return "resolves to this host's own address " + ip.String()
		}
	}
	return ""
}

// interfaceAddrs are the host's own addresses, read each time so that an
// address added after start counts too.
func interfaceAddrs() []net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var ips []net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			ips = append(ips, n.IP)
		}
	}
	return ips
}
