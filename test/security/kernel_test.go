//go:build linux

package security

import "testing"

// TestKernelSurface: the system calls and socket families that expose the
// most kernel code to user programs are refused with the documented errno:
// ENOSYS where runtimes must fall back (io_uring, unknown calls), EPERM
// where a call is simply not for sandboxes, EAFNOSUPPORT for socket
// families other than unix, inet, inet6 and netlink-route.
func TestKernelSurface(t *testing.T) {
	env(t)
	needAMD64(t)
	res := attack(t, "python", py(`
import socket
sysc("io_uring_setup", 425, 8, (ctypes.c_char * 120)())
sysc("io_uring_enter", 426, 0, 0, 0, 0, None, 0)
sysc("io_uring_register", 427, 0, 0, None, 0)
sysc("bpf prog load", 321, 5, (ctypes.c_char * 128)(), 128)
sysc("bpf map create", 321, 0, (ctypes.c_char * 128)(), 128)
sysc("perf_event_open", 298, (ctypes.c_char * 128)(), 0, -1, -1, 0)
sysc("keyctl", 250, 0, -4, 0)
sysc("add_key", 248, b"user", b"kiln", b"x", 1, -4)
sysc("request_key", 249, b"user", b"kiln", None, 0)
sysc("userfaultfd", 323, 0)
sysc("fanotify_init", 300, 0, 0)
sysc("name_to_handle_at", 303, -100, b"/etc/passwd", (ctypes.c_char * 136)(), (ctypes.c_int * 1)(), 0)
sysc("open_by_handle_at", 304, 3, (ctypes.c_char * 136)(), 0)
sysc("init_module", 175, None, 0, b"")
sysc("finit_module", 313, 0, b"", 0)
sysc("kexec_load", 246, 0, 0, None, 0)
sysc("reboot", 169, 0xfee1dead, 672274793, 0, None)  # LINUX_REBOOT_CMD_CAD_OFF
sysc("syslog", 103, 3, (ctypes.c_char * 64)(), 64)
sysc("iopl", 172, 3)
sysc("ioperm", 173, 0x80, 1, 1)
sysc("swapon", 167, b"/tmp/swap", 0)
sysc("settimeofday", 164, (ctypes.c_long * 2)(0, 2000000), None)  # invalid usec: harmless even if allowed
sysc("clock_settime", 227, 0, (ctypes.c_long * 2)(0, 2000000000))  # invalid nsec
sysc("sethostname", 170, b"pwned", 5)
sysc("acct", 163, b"/tmp/acct")
sysc("move_pages", 279, 0, 0, None, None, None, 0)
sysc("migrate_pages", 256, 1, 1, None, None)
sysc("personality ADDR_NO_RANDOMIZE", 135, 0x0040000)
sysc("personality READ_IMPLIES_EXEC", 135, 0x0400000)
sysc("personality query", 135, 0xffffffff)
sysc("unknown syscall 1000", 1000)
# Socket families.
def sock(label, fam, typ, proto=0):
    try:
        socket.socket(fam, typ, proto).close()
        print(label, "ok")
    except OSError as e:
        print(label, ename(e.errno))
sock("AF_VSOCK", 40, socket.SOCK_STREAM)
sock("AF_ALG", 38, socket.SOCK_SEQPACKET)
sock("AF_PACKET raw", 17, socket.SOCK_RAW, 0x0300)
sock("AF_PACKET dgram", 17, socket.SOCK_DGRAM, 0x0300)
sock("AF_KEY", 15, socket.SOCK_RAW, 2)
sock("AF_BLUETOOTH", 31, socket.SOCK_RAW, 0)
sock("AF_CAN", 29, socket.SOCK_RAW, 1)
sock("AF_RDS", 21, socket.SOCK_SEQPACKET)
sock("AF_TIPC", 30, socket.SOCK_RDM)
sock("AF_XDP", 44, socket.SOCK_RAW)
sock("AF_NETLINK audit", 16, socket.SOCK_RAW, 9)
sock("AF_NETLINK uevent", 16, socket.SOCK_DGRAM, 15)
sock("AF_NETLINK netfilter", 16, socket.SOCK_RAW, 12)
sock("AF_INET raw icmp", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
sock("AF_INET raw tcp", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
sock("AF_INET raw cloexec", socket.AF_INET, socket.SOCK_RAW | socket.SOCK_CLOEXEC, socket.IPPROTO_UDP)
sock("AF_INET6 raw", socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
sock("AF_INET SOCK_PACKET", socket.AF_INET, 10, 0x0300)
sock("AF_INET ping", socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
try:
    socket.socketpair(17, socket.SOCK_DGRAM)
    print("socketpair AF_PACKET ok")
except OSError as e:
    print("socketpair AF_PACKET", ename(e.errno))
sock("AF_UNIX", socket.AF_UNIX, socket.SOCK_STREAM)
sock("AF_INET tcp", socket.AF_INET, socket.SOCK_STREAM)
sock("AF_INET6 udp", socket.AF_INET6, socket.SOCK_DGRAM)
sock("AF_NETLINK route", 16, socket.SOCK_RAW, 0)
`), quick)
	expectLines(t, res,
		"io_uring_setup ENOSYS",
		"io_uring_enter ENOSYS",
		"io_uring_register ENOSYS",
		"bpf prog load EPERM",
		"bpf map create EPERM",
		"perf_event_open EPERM",
		"keyctl EPERM",
		"add_key EPERM",
		"request_key EPERM",
		"userfaultfd EPERM",
		"fanotify_init EPERM",
		"name_to_handle_at EPERM",
		"open_by_handle_at EPERM",
		"init_module EPERM",
		"finit_module EPERM",
		"kexec_load EPERM",
		"reboot EPERM",
		"syslog EPERM",
		"iopl EPERM",
		"ioperm EPERM",
		"swapon EPERM",
		"settimeofday EPERM",
		"clock_settime EPERM",
		"sethostname EPERM",
		"acct EPERM",
		"move_pages EPERM",
		"migrate_pages EPERM",
		"personality ADDR_NO_RANDOMIZE EPERM",
		"personality READ_IMPLIES_EXEC EPERM",
		"personality query ok",
		"unknown syscall 1000 ENOSYS",
		"AF_VSOCK EAFNOSUPPORT",
		"AF_ALG EAFNOSUPPORT",
		"AF_PACKET raw EAFNOSUPPORT",
		"AF_PACKET dgram EAFNOSUPPORT",
		"AF_KEY EAFNOSUPPORT",
		"AF_BLUETOOTH EAFNOSUPPORT",
		"AF_CAN EAFNOSUPPORT",
		"AF_RDS EAFNOSUPPORT",
		"AF_TIPC EAFNOSUPPORT",
		"AF_XDP EAFNOSUPPORT",
		"AF_NETLINK audit EAFNOSUPPORT",
		"AF_NETLINK uevent EAFNOSUPPORT",
		"AF_NETLINK netfilter EAFNOSUPPORT",
		"AF_INET raw icmp EPERM",
		"AF_INET raw tcp EPERM",
		"AF_INET raw cloexec EPERM",
		"AF_INET6 raw EPERM",
		"AF_INET SOCK_PACKET EPERM",
		// ICMP "ping" sockets need a gid in net.ipv4.ping_group_range,
		// which is empty in the sandbox's fresh network namespace.
		"AF_INET ping EACCES",
		"socketpair AF_PACKET EAFNOSUPPORT",
		"AF_UNIX ok",
		"AF_INET tcp ok",
		"AF_INET6 udp ok",
		"AF_NETLINK route ok",
	)
}
