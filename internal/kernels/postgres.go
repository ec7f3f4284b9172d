package kernels

import _ "embed"

// postgresSource is the PostgreSQL kernel: a private server per session,
// started by the kernel in the sandbox from the host's PostgreSQL 15, its
// data in the workspace's .kiln/postgres, reached through psycopg2 on a
// unix socket. Its doc comment says how the server is run, how a cell is
// split and run, what it displays and how errors and interrupts are
// reported.
//
//go:embed postgres/kernel.py
var postgresSource string

// Postgres runs the kernel with -I (isolated: a workspace file named like
// a standard module cannot replace it) and -S (no site, a faster start; the
// kernel adds Debian's dist-packages, where psycopg2 is, itself).
func Postgres() Spec {
	return Spec{
		Language: "postgres",
		Argv:     []string{"/usr/bin/python3", "-I", "-S", "-c", postgresSource},
	}
}
