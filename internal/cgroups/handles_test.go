package cgroups

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestHandles(t *testing.T) {
	tests := []struct {
		name     string
		fake     func(*testing.T) (*Host, *fakeTree)
		stats    map[string]string // user/ files to fill, relative to the tree
		wantSpec HandleSpec
		want     Usage
		// wantJoin are the cgroup.procs files Join writes to.
		wantJoin []string
		peak     string // the peak file ResetPeak writes to
	}{
		{
			name: "v1",
			fake: newV1Fake,
			stats: map[string]string{
				"sys/fs/cgroup/memory/kiln/sb-1/user/memory.max_usage_in_bytes": "66990080\n",
				"sys/fs/cgroup/memory/kiln/sb-1/user/memory.oom_control":        "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
				"sys/fs/cgroup/pids/kiln/sb-1/user/pids.events":                 "max 5\n",
				"sys/fs/cgroup/cpuacct/kiln/sb-1/user/cpuacct.usage":            "1500000000\n",
			},
			wantSpec: HandleSpec{Version: V1, Procs: []int{3, 4, 5, 6}, Peak: 7, OOM: 8, Pids: 9, CPU: 10},
			want:     Usage{PeakMemoryBytes: 66990080, OOMKills: 2, PidsLimitHits: 5, CPUTime: 1500 * time.Millisecond},
			wantJoin: []string{
				"sys/fs/cgroup/memory/kiln/sb-1/user/cgroup.procs",
				"sys/fs/cgroup/pids/kiln/sb-1/user/cgroup.procs",
				"sys/fs/cgroup/cpu/kiln/sb-1/user/cgroup.procs",
				"sys/fs/cgroup/cpuacct/kiln/sb-1/user/cgroup.procs",
			},
			peak: "sys/fs/cgroup/memory/kiln/sb-1/user/memory.max_usage_in_bytes",
		},
		{
			name: "v2",
			fake: newV2Fake,
			stats: map[string]string{
				"sys/fs/cgroup/kiln/sb-1/user/memory.peak":   "66990080\n",
				"sys/fs/cgroup/kiln/sb-1/user/memory.events": "low 0\nhigh 0\nmax 40\noom 1\noom_kill 1\noom_group_kill 0\n",
				"sys/fs/cgroup/kiln/sb-1/user/pids.events":   "max 3\n",
				"sys/fs/cgroup/kiln/sb-1/user/cpu.stat":      "usage_usec 250000\nuser_usec 200000\nsystem_usec 50000\n",
			},
			wantSpec: HandleSpec{Version: V2, Procs: []int{3}, Peak: 4, OOM: 5, Pids: 6, CPU: 7},
			want:     Usage{PeakMemoryBytes: 66990080, OOMKills: 1, PidsLimitHits: 3, CPUTime: 250 * time.Millisecond},
			wantJoin: []string{"sys/fs/cgroup/kiln/sb-1/user/cgroup.procs"},
			peak:     "sys/fs/cgroup/kiln/sb-1/user/memory.peak",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, fake := tt.fake(t)
			g, err := h.Create("sb-1", testLimits, agentLimits)
			if err != nil {
				t.Fatal(err)
			}
			for p, content := range tt.stats {
				fake.set(t, p, content)
			}
			hs, err := g.OpenHandles()
			if err != nil {
				t.Fatal(err)
			}
			defer hs.Close()

			spec := hs.Spec(3)
			if diff := cmp.Diff(tt.wantSpec, spec); diff != "" {
				t.Errorf("Spec(3) mismatch (-want +got):\n%s", diff)
			}
			if got, want := len(hs.Files()), len(spec.Procs)+4; got != want {
				t.Errorf("len(Files()) = %d, want %d", got, want)
			}
			// The spec crosses the process boundary as JSON.
			b, err := json.Marshal(spec)
			must(t, err)
			var back HandleSpec
			must(t, json.Unmarshal(b, &back))
			if diff := cmp.Diff(spec, back); diff != "" {
				t.Errorf("Spec JSON round trip (-sent +received):\n%s", diff)
			}

			for i := 0; i < 2; i++ { // every read starts at the beginning
				got, err := hs.Usage()
				if err != nil {
					t.Fatalf("Usage: %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("Usage() read %d mismatch (-want +got):\n%s", i, diff)
				}
			}
			got, err := g.Stats()
			if err != nil {
				t.Fatalf("Stats: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
			}

			must(t, hs.Join())
			written := fake.written(t)
			for _, p := range tt.wantJoin {
				if written[p] != "0\n" {
					t.Errorf("after Join %s holds %q, want %q", p, written[p], "0\n")
				}
			}
			fake.set(t, tt.peak, "")
			must(t, hs.ResetPeak())
			if got := fake.written(t)[tt.peak]; got != "0\n" {
				t.Errorf("after ResetPeak %s holds %q, want %q", tt.peak, got, "0\n")
			}

			must(t, hs.Close())
			if got := len(hs.Files()); got != 0 {
				t.Errorf("after Close Files() has %d files", got)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	h, fake := newV1Fake(t)
	g, err := h.Create("sb-1", testLimits, agentLimits)
	if err != nil {
		t.Fatal(err)
	}
	fake.set(t, "sys/fs/cgroup/pids/kiln/sb-1/user/pids.events", "max many\n")
	_, err = g.Stats()
	if err == nil || !strings.Contains(err.Error(), "pids limit hits") {
		t.Errorf("Stats with a malformed pids.events = %v, want an error about pids limit hits", err)
	}
}

// Before Linux 4.13 memory.oom_control has no oom_kill line; Stats falls
// back to memory.failcnt as a hint.
func TestStatsV1OOMHint(t *testing.T) {
	h, fake := newV1Fake(t)
	g, err := h.Create("sb-1", testLimits, agentLimits)
	if err != nil {
		t.Fatal(err)
	}
	user := "sys/fs/cgroup/memory/kiln/sb-1/user/"
	fake.set(t, user+"memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n")
	for failcnt, want := range map[string]int64{"0\n": 0, "17\n": 1} {
		fake.set(t, user+"memory.failcnt", failcnt)
		u, err := g.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if u.OOMKills != want {
			t.Errorf("with memory.failcnt %q, OOMKills = %d, want %d", failcnt, u.OOMKills, want)
		}
	}
}

func TestFromSpecRejects(t *testing.T) {
	for name, s := range map[string]HandleSpec{
		"no version":     {Procs: []int{3}, Peak: 4, OOM: 5, Pids: 6, CPU: 7},
		"no procs":       {Version: V2, Peak: 4, OOM: 5, Pids: 6, CPU: 7},
		"five procs":     {Version: V1, Procs: []int{3, 4, 5, 6, 7}, Peak: 8, OOM: 9, Pids: 10, CPU: 11},
		"repeated fd":    {Version: V2, Procs: []int{3}, Peak: 4, OOM: 4, Pids: 6, CPU: 7},
		"negative fd":    {Version: V2, Procs: []int{-3}, Peak: 4, OOM: 5, Pids: 6, CPU: 7},
		"fd not open":    {Version: V2, Procs: []int{100003}, Peak: 100004, OOM: 100005, Pids: 100006, CPU: 100007},
		"zero value too": {},
	} {
		if _, err := FromSpec(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("FromSpec(%s) error = %v, want ErrInvalid", name, err)
		}
	}
}
