// Package security is kiln's security suite: it runs attacker code in fresh
// native sandboxes and checks, after every case, that the host is unchanged
// (a set of canary files hashes the same), that the service still runs code,
// and that nothing of the sandbox is left on the host (processes in the
// sandbox uid range, mounts, cgroups, the stage directory).
//
// It needs root, because sandboxes map to their own host uid ranges and
// cgroups; without root every test skips and says so. Run it with
//
//	go test -count=1 ./test/security/
//
// The harness is in harness_test.go; each file covers one class of attack.
package security
