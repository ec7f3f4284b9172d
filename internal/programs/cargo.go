package programs

import (
	"context"
	"os"
	"path"
	"strings"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// A Rust entry inside a Cargo package (a Cargo.toml in its directory or
// above, within the workspace) is built and run by Cargo, offline: its
// dependencies come from the package's vendored sources, named by the
// source replacement of its .cargo/config.toml, as `cargo vendor` leaves
// them. Debian's cargo (scripts/deps installs it) goes with Debian's
// rustc, which the sandbox runs; the host's rustup toolchain under /root
// is out of the sandbox's sight.
//
// Cargo tracks its own inputs (Cargo.toml, Cargo.lock, .cargo/config.toml,
// vendor/, build scripts), which kiln's content key would miss, so kiln
// does not cache these builds: its target directory lasts in the build
// area and Cargo rebuilds only what changed.

// cargoBin is Debian's cargo, beside Debian's rustc.
const cargoBin = "/usr/bin/cargo"

// cargoProject finds the Cargo package of a workspace entry: the nearest
// Cargo.toml at or above the entry's directory.
func cargoProject(ctx context.Context, ex Execer, j *job, known map[string][]byte) error {
	for d := j.dir; ; d = path.Dir(d) {
		m := path.Join(d, "Cargo.toml")
		_, ok := known[m]
		if !ok {
			fi, err := ex.Stat(ctx, m)
			ok = err == nil && fi.Type == "file"
		}
		if ok {
			if _, err := os.Stat(cargoBin); err != nil {
				return kiln.Errorf(kiln.Unsupported, "%s is in a Cargo package (%s), which needs cargo, and it is not installed on this host: install the Debian package cargo (kiln's scripts/deps does)", path.Join(j.dir, j.entry), m)
			}
			j.cargo = d
			return nil
		}
		if d == "." {
			return nil
		}
	}
}

// cargoArgs are the flags every cargo command of j takes: offline, the
// package's manifest, and the target directory in the build area.
func cargoArgs(j *job) []string {
	return []string{"--offline", "--color", "never",
		"--manifest-path", path.Join(j.root, j.cargo, "Cargo.toml"),
		"--target-dir", cargoTarget(j)}
}

// cargoEnv keeps Cargo's own files in the build area and tells it the
// run's build options (checked against rustc's allowlist) as rustc flags.
func cargoEnv(j *job) []string {
	env := []string{
		"CARGO_HOME=" + path.Join(j.area, "cargo/home"),
		"CARGO_NET_OFFLINE=true", "CARGO_TERM_COLOR=never", "CARGO_TERM_PROGRESS_WHEN=never",
		"RUSTC=" + j.l.Binary,
	}
	if len(j.opts) > 0 {
		env = append(env, "CARGO_ENCODED_RUSTFLAGS="+strings.Join(j.opts, "\x1f"))
	}
	return env
}

// cargoBinTarget is the --bin flag for an entry under src/bin/, whose
// binary is not the package's default one.
func cargoBinTarget(j *job) []string {
	rel := strings.TrimPrefix(path.Join(j.dir, j.entry), j.cargo+"/")
	if j.cargo == "." {
		rel = path.Join(j.dir, j.entry)
	}
	if name, ok := strings.CutPrefix(rel, "src/bin/"); ok {
		name = strings.TrimSuffix(strings.TrimSuffix(name, "/main.rs"), ".rs")
		if !strings.Contains(name, "/") {
			return []string{"--bin", name}
		}
	}
	return nil
}

// cargoBuild builds the package's binary, or its tests without running them.
func cargoBuild(j *job) step {
	argv := []string{cargoBin, "build"}
	if j.test {
		argv = []string{cargoBin, "test", "--no-run"}
	}
	argv = append(append(argv, cargoArgs(j)...), cargoBinTarget(j)...)
	return step{argv: argv, env: cargoEnv(j)}
}

// cargoRun runs what cargoBuild built (Cargo finds it fresh): the binary
// with the run's arguments, or the tests, the arguments going to the
// harness.
func cargoRun(j *job) step {
	argv := []string{cargoBin, "run", "-q"}
	if j.test {
		// Not -q: the harness would print dots, not each test's line.
		argv = []string{cargoBin, "test"}
	}
	argv = append(append(append(argv, cargoArgs(j)...), cargoBinTarget(j)...), "--")
	return step{argv: argv, env: cargoEnv(j)}
}
