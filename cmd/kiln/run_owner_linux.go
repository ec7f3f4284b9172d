package main

import (
	"encoding/binary"
	"net"
	"os"
	"syscall"
)

// fileOwner is the uid that owns name.
func fileOwner(name string) (uint32, bool) {
	fi, err := os.Stat(name)
	if err != nil {
		return 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}

// listenerUIDs are the owners of the TCP sockets listening on port on a
// loopback or wildcard address. It asks the kernel's sock_diag over
// netlink for listening sockets only, which takes well under a
// millisecond; reading /proc/net/tcp, which lists every socket, took
// 5-10 ms on a busy host, as much as the run it was choosing for.
func listenerUIDs(port int) []uint32 {
	var uids []uint32
	for _, family := range []uint8{syscall.AF_INET, syscall.AF_INET6} {
		uids = append(uids, diagListeners(family, port)...)
	}
	return uids
}

const (
	sockDiagByFamily = 20 // SOCK_DIAG_BY_FAMILY
	netlinkSockDiag  = 4  // NETLINK_SOCK_DIAG
	tcpListen        = 10 // TCP_LISTEN
	diagReqLen       = 56 // struct inet_diag_req_v2
	diagMsgLen       = 72 // struct inet_diag_msg
)

// diagListeners dumps the listening TCP sockets of one family and keeps
// the uids of those on port at a loopback or wildcard address.
func diagListeners(family uint8, port int) []uint32 {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, netlinkSockDiag)
	if err != nil {
		return nil
	}
	defer syscall.Close(fd)
	req := make([]byte, syscall.NLMSG_HDRLEN+diagReqLen)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], sockDiagByFamily)
	binary.NativeEndian.PutUint16(req[6:], syscall.NLM_F_REQUEST|syscall.NLM_F_DUMP)
	body := req[syscall.NLMSG_HDRLEN:]
	body[0], body[1] = family, syscall.IPPROTO_TCP
	binary.NativeEndian.PutUint32(body[4:], 1<<tcpListen)
	if err := syscall.Sendto(fd, req, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return nil
	}
	var uids []uint32
	buf := make([]byte, 32<<10)
	for {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			return uids
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return uids
		}
		for _, m := range msgs {
			if m.Header.Type == syscall.NLMSG_DONE || m.Header.Type == syscall.NLMSG_ERROR {
				return uids
			}
			d := m.Data
			if len(d) < diagMsgLen || int(binary.BigEndian.Uint16(d[4:])) != port {
				continue
			}
			ip := net.IP(d[8:24])
			if family == syscall.AF_INET {
				ip = net.IP(d[8:12])
			}
			if ip.IsLoopback() || ip.IsUnspecified() {
				uids = append(uids, binary.NativeEndian.Uint32(d[64:]))
			}
		}
	}
}
