package main

import (
	"bytes"
	"testing"

	"github.com/kiln-dev/kiln/internal/service"
)

// TestServeBuildCacheFlag: kiln serve bounds each user's build caches at
// 2 GiB unless --build-cache says otherwise; a negative value turns them
// off.
func TestServeBuildCacheFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int64
	}{
		{nil, service.DefaultBuildCacheBytes},
		{[]string{"--build-cache", "536870912"}, 512 << 20},
		{[]string{"--build-cache", "-1"}, -1},
	} {
		f, err := parseServe(append([]string{"--data", t.TempDir()}, c.args...), &bytes.Buffer{})
		if err != nil {
			t.Fatalf("parseServe(%q): %v", c.args, err)
		}
		if f.svc.BuildCacheBytes != c.want {
			t.Errorf("parseServe(%q): build cache bound %d, want %d", c.args, f.svc.BuildCacheBytes, c.want)
		}
	}
}
