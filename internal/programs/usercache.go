package programs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path"
)

// A user's build caches. When the sandbox has them (an Execer with a
// method BuildCache() string that is not empty: the service binds one
// host directory per user, read-write, into that user's sandboxes only),
// they carry across the user's one-shot runs, sessions and batch items:
//
//	<cache>/go/               Go's build cache (GOCACHE), seeded once
//	<cache>/build/<key>/      a build's products, published from the
//	                          build area when complete; "ok" marks it
//	<cache>/cargo/target/     Cargo's target directory
//
// Several sandboxes of the user, each with its own host uid, may use the
// caches at once. Go and Cargo write and rewrite their files in place,
// so they run with umask 0 there: every file stays writable to the
// user's next sandbox (no other user's sandbox can reach the directory).
// A build's products are written once, in the build area, then copied
// under a temporary name and renamed into place, so a reader never sees
// a half-written build and two sandboxes building the same key keep the
// first. The service bounds the directory's size (service/buildcache.go).

// goCache is j's GOCACHE.
func goCache(j *job) string {
	if j.cache != "" {
		return path.Join(j.cache, "go")
	}
	return path.Join(j.area, "go/cache")
}

// cargoTarget is j's Cargo target directory.
func cargoTarget(j *job) string {
	if j.cache != "" {
		return path.Join(j.cache, "cargo/target")
	}
	return path.Join(j.area, "cargo/target")
}

// shared runs argv with umask 0, for a tool that writes the user's shared
// caches.
func shared(argv []string) []string {
	return append([]string{"/bin/sh", "-c", `umask 0 && exec "$@"`, "sh"}, argv...)
}

// publish copies a complete build (its marker written) to the user's
// cache under dst, atomically; best effort: a build not published is
// made again by the next sandbox that needs it.
func publish(ctx context.Context, ex Execer, src, dst string) {
	var b [8]byte
	rand.Read(b[:])
	tmp := path.Join(path.Dir(dst), ".tmp-"+hex.EncodeToString(b[:]))
	// mv -T fails when dst exists already (another sandbox won): the copy
	// is dropped.
	areaExec(ctx, ex, shared([]string{"/bin/sh", "-c", `mkdir -p "$(dirname "$2")" && cp -R "$1" "$2" && mv -T "$2" "$3" 2>/dev/null || rm -rf "$2"`,
		"sh", src, tmp, dst}), nil, nil)
}
