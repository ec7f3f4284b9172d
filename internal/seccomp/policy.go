package seccomp

// Rules is the policy: every system call the filter treats other than with
// DefaultAction (ENOSYS). A name the running architecture does not have
// (open on arm64, say) is skipped there; see arch_linux_*.go.
//
// Review rule of thumb: a call is allowed when ordinary programs need it and
// it acts only on the caller's own process, files and sockets; it gets EPERM
// when it reaches the kernel's shared state or another process; it is left
// out (ENOSYS) when nothing ordinary needs it and a runtime may fall back.
var Rules = join(
	// Process and thread lifetime. Every runtime starts threads and children
	// and waits for them; clone is filtered below, clone3 gets ENOSYS.
	allow("exit", "exit_group", "fork", "vfork", "execve", "execveat",
		"wait4", "waitid", "set_tid_address", "set_robust_list",
		"get_robust_list", "rseq", "arch_prctl", "prctl", "restart_syscall",
		"getpid", "getppid", "gettid", "getrusage", "times",
		"kill", "tgkill", "tkill", "pidfd_open", "pidfd_send_signal"),

	// Identity, sessions and process groups. The sandbox's user has no
	// capabilities, so the set* calls can only drop what it already has.
	allow("getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid",
		"getgroups", "setuid", "setgid", "setreuid", "setregid", "setresuid",
		"setresgid", "setfsuid", "setfsgid", "setgroups", "capget", "capset",
		"getpgid", "setpgid", "getpgrp", "getsid", "setsid"),

	// The caller's own memory: allocators, JITs (V8, the JVM), Go's runtime,
	// glibc's shadow stacks and sealing. Locked memory is bounded by
	// RLIMIT_MEMLOCK; get_mempolicy only reads.
	allow("brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "msync",
		"mincore", "mlock", "mlock2", "munlock", "mlockall", "munlockall",
		"membarrier", "memfd_create", "pkey_alloc", "pkey_free",
		"pkey_mprotect", "map_shadow_stack", "mseal", "get_mempolicy"),

	// Signals, including the ones Go's runtime sends itself to preempt.
	allow("rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending",
		"rt_sigsuspend", "rt_sigtimedwait", "rt_sigqueueinfo",
		"rt_tgsigqueueinfo", "sigaltstack", "signalfd", "signalfd4",
		"pause", "alarm"),

	// Reading clocks, sleeping and timers. Setting the clock is denied below.
	allow("clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep",
		"gettimeofday", "time", "getitimer", "setitimer", "timer_create",
		"timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete",
		"timerfd_create", "timerfd_settime", "timerfd_gettime"),

	// Scheduling of the caller's own threads; raising priority needs
	// CAP_SYS_NICE, which the sandbox's user lacks.
	allow("sched_yield", "sched_getaffinity", "sched_setaffinity",
		"sched_getparam", "sched_setparam", "sched_getscheduler",
		"sched_setscheduler", "sched_get_priority_max",
		"sched_get_priority_min", "sched_rr_get_interval", "sched_getattr",
		"sched_setattr", "getpriority", "setpriority", "ioprio_get",
		"ioprio_set", "getcpu"),

	// Futexes: every thread library.
	allow("futex", "futex_waitv", "futex_wake", "futex_wait", "futex_requeue"),

	// Descriptors and I/O on them, including the zero-copy calls Go, cp and
	// Python's shutil use.
	allow("read", "write", "readv", "writev", "pread64", "pwrite64", "preadv",
		"pwritev", "preadv2", "pwritev2", "lseek", "close", "close_range",
		"dup", "dup2", "dup3", "fcntl", "flock", "ftruncate", "fallocate",
		"fsync", "fdatasync", "sync", "syncfs", "sync_file_range",
		"fadvise64", "readahead", "copy_file_range", "sendfile", "splice",
		"tee", "vmsplice"),

	// Files by path. Both the legacy calls (amd64 only) and the *at family;
	// Landlock and mount options, not this filter, decide which paths work.
	allow("open", "openat", "openat2", "creat", "stat", "lstat", "fstat",
		"newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat",
		"faccessat2", "readlink", "readlinkat", "getcwd", "chdir", "fchdir",
		"mkdir", "mkdirat", "rmdir", "rename", "renameat", "renameat2",
		"link", "linkat", "unlink", "unlinkat", "symlink", "symlinkat",
		"chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown",
		"lchown", "fchownat", "umask", "truncate", "utime", "utimes",
		"utimensat", "futimesat", "mknod", "mknodat", "getdents",
		"getdents64"),

	// Extended attributes (cp -a, rsync, Python's shutil.copystat).
	allow("getxattr", "lgetxattr", "fgetxattr", "getxattrat", "setxattr",
		"lsetxattr", "fsetxattr", "setxattrat", "listxattr", "llistxattr",
		"flistxattr", "listxattrat", "removexattr", "lremovexattr",
		"fremovexattr", "removexattrat"),

	// Waiting on descriptors: event loops (libuv, asyncio, Go's netpoller).
	allow("poll", "ppoll", "select", "pselect6", "epoll_create",
		"epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
		"epoll_pwait2", "eventfd", "eventfd2", "pipe", "pipe2",
		"inotify_init", "inotify_init1", "inotify_add_watch",
		"inotify_rm_watch"),

	// Linux AIO (libaio: databases). io_uring is not this; see below.
	allow("io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents",
		"io_pgetevents"),

	// Sockets once made. Which sockets can be made is filtered below; the
	// network namespace decides where they can reach.
	allow("bind", "listen", "accept", "accept4", "connect", "getsockname",
		"getpeername", "getsockopt", "setsockopt", "shutdown", "sendto",
		"recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg"),

	// System V and POSIX IPC, inside the sandbox's own IPC namespace
	// (PostgreSQL, multiprocessing).
	allow("shmget", "shmat", "shmdt", "shmctl", "semget", "semop",
		"semtimedop", "semctl", "msgget", "msgsnd", "msgrcv", "msgctl",
		"mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive",
		"mq_notify", "mq_getsetattr"),

	// Facts about the system and the caller's limits; randomness.
	allow("uname", "sysinfo", "getrlimit", "setrlimit", "prlimit64",
		"getrandom"),

	// Calls that can only restrict the caller further.
	allow("seccomp", "landlock_create_ruleset", "landlock_add_rule",
		"landlock_restrict_self"),

	// Calls allowed depending on their arguments.
	[]Rule{
		// New namespaces are the usual first step of a kernel exploit; plain
		// fork and thread creation pass.
		{Name: "clone", Action: Allow, Conds: []Cond{
			{Checks: []Check{anyBit(0, cloneNewNamespace)}, Action: EPERM},
		}},
		{Name: "socket", Action: Allow, Conds: socketConds},
		{Name: "socketpair", Action: Allow, Conds: socketConds},
		// TIOCSTI pushes input into a terminal, TIOCLINUX reaches the
		// console: both can type commands into someone else's shell.
		// TIOCSETD attaches a line discipline, which can load rarely used
		// and historically buggy kernel code (n_gsm, n_hdlc).
		{Name: "ioctl", Action: Allow, Conds: []Cond{
			{Checks: []Check{argIn(1, tiocsti, tioclinux, tiocsetd)}, Action: EPERM},
		}},
		// Only asking for the persona, or setting plain Linux. Other
		// personas turn off ASLR or change the ABI the kernel presents.
		{Name: "personality", Action: EPERM, Conds: []Cond{
			{Checks: []Check{argIn(0, perLinux, perQuery)}, Action: Allow},
		}},
	},

	// ENOSYS, not EPERM, so runtimes fall back: glibc's pthread_create and
	// posix_spawn retry with clone, libuv and Tokio with epoll. clone3's
	// flags live in memory a filter cannot read, and io_uring runs work
	// outside the reach of this filter.
	deny(ENOSYS, "clone3", "io_uring_setup", "io_uring_enter",
		"io_uring_register"),

	// Mounts, namespaces and the filesystem root: the ways out of the
	// sandbox's view of the world.
	deny(EPERM, "mount", "umount2", "pivot_root", "chroot", "unshare",
		"setns", "fsopen", "fsconfig", "fsmount", "fspick", "open_tree",
		"open_tree_attr", "move_mount", "mount_setattr"),

	// Reaching into other processes.
	deny(EPERM, "ptrace", "process_vm_readv", "process_vm_writev",
		"process_madvise", "pidfd_getfd", "kcmp"),

	// Large kernel attack surface that ordinary programs do not use: eBPF,
	// perf, userfaultfd (stalls kernel copies), the keyring, fanotify, file
	// handles (they bypass path checks).
	deny(EPERM, "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key",
		"request_key", "fanotify_init", "fanotify_mark", "open_by_handle_at",
		"name_to_handle_at", "lookup_dcookie", "uselib", "nfsservctl"),

	// Machine-wide state: modules, kexec, swap, clocks, the kernel log,
	// quotas, I/O ports, hostnames.
	deny(EPERM, "init_module", "finit_module", "delete_module", "kexec_load",
		"kexec_file_load", "reboot", "acct", "swapon", "swapoff",
		"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
		"syslog", "quotactl", "quotactl_fd", "iopl", "ioperm", "vhangup",
		"sethostname", "setdomainname"),

	// NUMA placement. No runtime needs it by default (the JVM only with
	// -XX:+UseNUMA, which then carries on without it); move_pages and
	// migrate_pages can act on other processes.
	deny(EPERM, "mbind", "set_mempolicy", "set_mempolicy_home_node",
		"migrate_pages", "move_pages"),
)

// socketConds limits socket and socketpair to the families programs use to
// talk to the network proxy, to each other and to the kernel's routing table
// (getifaddrs). Raw IP sockets could forge packets.
var socketConds = []Cond{
	{Checks: []Check{argNotIn(0, afUnix, afInet, afInet6, afNetlink)}, Action: EAFNOSUPPORT},
	{Checks: []Check{argIn(0, afNetlink), argNotIn(2, netlinkRoute)}, Action: EAFNOSUPPORT},
	{Checks: []Check{argIn(0, afInet, afInet6), maskIn(1, sockTypeMask, sockRaw, sockPacket)}, Action: EPERM},
}

func allow(names ...string) []Rule { return named(Allow, names) }

func deny(a Action, names ...string) []Rule { return named(a, names) }

func named(a Action, names []string) []Rule {
	rules := make([]Rule, len(names))
	for i, n := range names {
		rules[i] = Rule{Name: n, Action: a}
	}
	return rules
}

func join(groups ...[]Rule) []Rule {
	var all []Rule
	for _, g := range groups {
		all = append(all, g...)
	}
	return all
}

func argIn(arg int, vals ...uint32) Check {
	return Check{Arg: arg, Mask: 0xffffffff, Op: In, Vals: vals}
}

func argNotIn(arg int, vals ...uint32) Check {
	return Check{Arg: arg, Mask: 0xffffffff, Op: NotIn, Vals: vals}
}

func maskIn(arg int, mask uint32, vals ...uint32) Check {
	return Check{Arg: arg, Mask: mask, Op: In, Vals: vals}
}

// anyBit holds when the argument has any bit of mask set.
func anyBit(arg int, mask uint32) Check {
	return Check{Arg: arg, Mask: mask, Op: NotIn, Vals: []uint32{0}}
}
