// Package programs runs the cells of kiln's program languages (c, cpp,
// fortran, go, java, php, ruby, rust): each cell is a whole program (its
// code), or a program in the workspace named by its entry file, that is
// compiled if the language needs it and then run in the workspace.
//
// # The user's files are the user's
//
// A cell's code never goes into the workspace: it is written, under its
// Name (main.c by default), into the build area, a directory on the
// sandbox's private /tmp (BuildArea), and built from there, so a user's
// own main.c is never overwritten. The workspace is on its include path: C
// and C++ headers (-iquote), Fortran includes (-I), Java classes
// (-sourcepath). Go and Rust code is built alone (the standard library
// only); a multi-file project is run by its entry file instead (Entry),
// built from the workspace as it is, with only the build's products in the
// build area. Nothing kiln makes is in the workspace, so a cell's artifacts
// are exactly what its program changed.
//
// Everything happens inside the sandbox through its agent, the compiler
// included, so a compilation runs under the same limits as any program: a
// compiler bomb is stopped like an infinite loop. This package is host-side:
// it decides the argv of each step (never a shell), writes the files, reads
// the compiler's output into diagnostics and keeps compiled programs in the
// workspace.
//
// # Builds
//
// The sources of a build are, per language:
//
//   - c, cpp, fortran: every source file of the language in the entry's
//     directory (not below it), the entry last; Fortran files that define
//     modules come before the files that use them. Headers anywhere below the
//     directory count for the cache.
//   - go: the package in the entry's directory: with a go.mod (in that
//     directory or above) in module mode, so packages in subdirectories
//     import by the module's path; without one, the package's files by
//     name, as "go run *.go" would. There is no network: GOPROXY=off, only
//     the standard library and the module's own packages.
//   - java: the entry and the classes it uses, which javac finds from the
//     package root (the entry's directory, or for src/app/Main.java in
//     package app, src); the main class is the entry's public class in its
//     package. A public class named otherwise than its file (HelloWorld in
//     test.java, which "java test.java" runs) is compiled from a copy named
//     after the class; messages still name the user's file.
//   - rust: the entry as the crate root (edition 2021); "mod x;" finds x.rs.
//
// Tests beside an empty main do not pass silently: a Rust file with
// #[test] functions, or a Go package with Test functions (in _test.go
// files, or in a cell's code), whose main is missing or empty, is built as
// its tests (rustc --test, go test -c), and the run runs them; an entry
// named x_test.go always does. When main has a body, main runs and a
// warning says the tests were not run.
//   - php, ruby: no compilation; the entry's syntax is checked (php -l,
//     ruby -wc) before it runs.
//
// The build and the run are separate executions, each with the program's
// time and output limits; the compiler's output is kept apart from the
// program's, in Result.CompileLog and Result.Diagnostics.
//
// Builds are cached by content: the key is a hash of the language, the build
// command and every file the build may read (the sources and headers below
// the entry's directory, by extension). The output lives in the build area
// under build/<key>/, so it lasts as long as the sandbox; the newest few
// builds are kept. Go's own build cache is kept in the area's go/, so only
// the first Go cell of a session compiles the standard library. The
// Execer's file operations reach only the workspace, so the build area is
// written and read by small programs (tar, cat, ls, rm) through execs.
//
// # Runtimes that cannot see the sandbox
//
// The sandbox has no /sys, so runtimes cannot read their cgroup limits. The
// JVM is told the memory limit (-XX:MaxRAM) and the CPU count, and uses the
// serial collector (few threads: the pids limit counts threads); Go programs
// get GOMAXPROCS and GOMEMLIMIT; PHP gets a memory_limit below the
// sandbox's.
package programs
