// Package programs runs the cells of kiln's program languages (c, cpp,
// fortran, go, java, php, ruby, rust): each cell is a whole program, or a set
// of workspace files and an entry point, that is compiled if the language
// needs it and then run.
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
//   - go: the package in the entry's directory, built in module mode. A cell
//     without a go.mod (in that directory or above it) gets one that says
//     "module main" and the installed Go version, so packages in
//     subdirectories import as "main/<dir>". There is no network:
//     GOPROXY=off, only the standard library and the module's own packages.
//   - java: the entry and the classes it uses, which javac finds from the
//     package root (the entry's directory, or for src/app/Main.java in
//     package app, src); the main class is the entry's name in its package.
//   - rust: the entry as the crate root (edition 2021); "mod x;" finds x.rs.
//   - php, ruby: no compilation; the entry's syntax is checked (php -l,
//     ruby -wc) before it runs.
//
// The build and the run are separate executions, each with the program's
// time and output limits; the compiler's output is kept apart from the
// program's, in Result.CompileLog and Result.Diagnostics.
//
// Builds are cached by content: the key is a hash of the language, the build
// command and every file the build may read (the sources and headers below
// the entry's directory, by extension). The output lives in the workspace
// under .kiln/build/<key>/, so it lasts as long as the session; the newest
// few builds are kept. Go's own build cache is kept in .kiln/go, so only the
// first Go cell of a session compiles the standard library.
//
// # Runtimes that cannot see the sandbox
//
// The sandbox has no /sys, so runtimes cannot read their cgroup limits. The
// JVM is told the memory limit (-XX:MaxRAM) and the CPU count, and uses the
// serial collector (few threads: the pids limit counts threads); Go programs
// get GOMAXPROCS and GOMEMLIMIT; PHP gets a memory_limit below the
// sandbox's.
package programs
