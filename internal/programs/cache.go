package programs

import (
	"bytes"
	"context"
	"path"
	"strings"
)

// keepBuilds is how many builds a sandbox keeps. Builds live on the
// sandbox's /tmp, a tmpfs whose pages count against its memory.
const keepBuilds = 8

// evict deletes all but the newest builds, keeping keep. It is best effort:
// a build it fails to delete is tried again next time.
func evict(ctx context.Context, ex Execer, area, keep string) {
	dir := path.Join(area, "build")
	var out bytes.Buffer
	// Newest first: a build's directory changes last when its marker is
	// written.
	if ok, err := areaExec(ctx, ex, []string{lsBin, "-1t", "--", dir}, nil, &out); err != nil || !ok {
		return
	}
	var old []string
	n := 1 // keep
	for _, name := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if name == "" || name == keep || strings.ContainsAny(name, "/\x00") {
			continue
		}
		if n++; n > keepBuilds {
			old = append(old, path.Join(dir, name))
		}
	}
	if len(old) > 0 {
		areaRemove(ctx, ex, old...)
	}
}
