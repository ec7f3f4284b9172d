package kernels

import _ "embed"

// sqlSource is the SQL kernel: SQLite through Python's sqlite3 module, on a
// database file in the workspace. Its doc comment says how a cell is split
// and run, what it displays and how errors and interrupts are reported.
//
//go:embed sql/kernel.py
var sqlSource string

// SQL runs the kernel with -I (isolated: a workspace file named like
// a standard module cannot replace it) and -S (no site, a faster start).
// KILN_SQL_DB, from the session's environment, names another database file.
func SQL() Spec {
	return Spec{
		Language: "sql",
		Argv:     []string{"/usr/bin/python3", "-I", "-S", "-c", sqlSource},
	}
}
