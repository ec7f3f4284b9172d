package programs

import (
	"context"
	"path"
	"sort"
)

// buildDir holds the builds, one directory per key, relative to the
// workspace. A build is complete once its directory has the file "ok", which
// holds the compiler's output.
const buildDir = ".kiln/build"

// keepBuilds is how many builds a workspace keeps. Builds live on the
// workspace's tmpfs, whose pages count against the sandbox's memory.
const keepBuilds = 8

// evict deletes all but the builds used last, keeping keep. It is best
// effort: a build it fails to delete is tried again next time.
func evict(ctx context.Context, ex Execer, keep string) {
	list, err := ex.List(ctx, buildDir)
	if err != nil || len(list) <= keepBuilds {
		return
	}
	type build struct {
		name string
		used int64 // the marker's mtime; 0 for an incomplete build
	}
	var builds []build
	for _, e := range list {
		if e.Name == keep {
			continue
		}
		b := build{name: e.Name}
		if fi, err := ex.Stat(ctx, path.Join(buildDir, e.Name, "ok")); err == nil {
			b.used = fi.ModTime
		}
		builds = append(builds, b)
	}
	sort.Slice(builds, func(a, b int) bool { return builds[a].used > builds[b].used })
	for _, b := range builds[min(len(builds), keepBuilds-1):] {
		ex.Delete(ctx, path.Join(buildDir, b.name), true)
	}
}
