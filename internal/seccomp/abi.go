package seccomp

// Linux ABI values the policy and the filter use, written out so that Rules
// builds on every platform. They are those of amd64 and arm64; a test checks
// them against golang.org/x/sys/unix.
const (
	errnoEPERM        = 1
	errnoENOSYS       = 38
	errnoEAFNOSUPPORT = 97

	afUnix       = 1
	afInet       = 2
	afInet6      = 10
	afNetlink    = 16
	netlinkRoute = 0
	sockRaw      = 3
	sockPacket   = 10
	sockTypeMask = 0xf // the type without SOCK_NONBLOCK and SOCK_CLOEXEC

	tiocsti   = 0x5412
	tioclinux = 0x541c
	tiocsetd  = 0x5423

	perLinux = 0
	perQuery = 0xffffffff // personality(0xffffffff) only reports

	// cloneNewNamespace is every CLONE_NEW* flag: NEWTIME, NEWNS, NEWCGROUP,
	// NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET. CLONE_NEWTIME shares its bit
	// with clone's exit-signal byte, where no valid signal sets it.
	cloneNewNamespace = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 |
		0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
)
