package cgroups

import (
	"context"
	"errors"
	"io/fs"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var (
	testLimits  = Limits{MemoryBytes: 64 << 20, Pids: 16, CPUMillis: 500}
	agentLimits = Limits{MemoryBytes: 32 << 20, Pids: 8}
)

func TestCreateWritesLimits(t *testing.T) {
	tests := []struct {
		name string
		fake func(*testing.T) (*Host, *fakeTree)
		want map[string]string
	}{
		{
			name: "v1",
			fake: newV1Fake,
			want: map[string]string{
				"sys/fs/cgroup/memory/kiln/":                                       "",
				"sys/fs/cgroup/memory/kiln/sb-1/":                                  "",
				"sys/fs/cgroup/memory/kiln/sb-1/user/":                             "",
				"sys/fs/cgroup/memory/kiln/sb-1/user/memory.limit_in_bytes":        "67108864",
				"sys/fs/cgroup/memory/kiln/sb-1/user/memory.memsw.limit_in_bytes":  "67108864",
				"sys/fs/cgroup/memory/kiln/sb-1/user/memory.swappiness":            "0",
				"sys/fs/cgroup/memory/kiln/sb-1/agent/":                            "",
				"sys/fs/cgroup/memory/kiln/sb-1/agent/memory.limit_in_bytes":       "33554432",
				"sys/fs/cgroup/memory/kiln/sb-1/agent/memory.memsw.limit_in_bytes": "33554432",
				"sys/fs/cgroup/memory/kiln/sb-1/agent/memory.swappiness":           "0",
				"sys/fs/cgroup/pids/kiln/":                                         "",
				"sys/fs/cgroup/pids/kiln/sb-1/":                                    "",
				"sys/fs/cgroup/pids/kiln/sb-1/user/":                               "",
				"sys/fs/cgroup/pids/kiln/sb-1/user/pids.max":                       "16",
				"sys/fs/cgroup/pids/kiln/sb-1/agent/":                              "",
				"sys/fs/cgroup/pids/kiln/sb-1/agent/pids.max":                      "8",
				"sys/fs/cgroup/cpu/kiln/":                                          "",
				"sys/fs/cgroup/cpu/kiln/sb-1/":                                     "",
				"sys/fs/cgroup/cpu/kiln/sb-1/user/":                                "",
				"sys/fs/cgroup/cpu/kiln/sb-1/user/cpu.cfs_period_us":               "100000",
				"sys/fs/cgroup/cpu/kiln/sb-1/user/cpu.cfs_quota_us":                "50000",
				"sys/fs/cgroup/cpu/kiln/sb-1/agent/":                               "",
				"sys/fs/cgroup/cpuacct/kiln/":                                      "",
				"sys/fs/cgroup/cpuacct/kiln/sb-1/":                                 "",
				"sys/fs/cgroup/cpuacct/kiln/sb-1/user/":                            "",
				"sys/fs/cgroup/cpuacct/kiln/sb-1/agent/":                           "",
			},
		},
		{
			name: "v1 co-mounted, no swap accounting",
			fake: func(t *testing.T) (*Host, *fakeTree) {
				files := map[string]string{}
				for k, v := range v1GroupFiles {
					if !strings.HasPrefix(k, "memory.memsw.") && k != "memory.swappiness" {
						files[k] = v
					}
				}
				return newFake(t, comountedMountinfo, map[string]string{
					"sys/fs/cgroup/cpu,cpuacct/": "", "sys/fs/cgroup/memory/": "", "sys/fs/cgroup/pids/": "",
				}, files)
			},
			want: map[string]string{
				"sys/fs/cgroup/memory/kiln/":                                 "",
				"sys/fs/cgroup/memory/kiln/sb-1/":                            "",
				"sys/fs/cgroup/memory/kiln/sb-1/user/":                       "",
				"sys/fs/cgroup/memory/kiln/sb-1/user/memory.limit_in_bytes":  "67108864",
				"sys/fs/cgroup/memory/kiln/sb-1/agent/":                      "",
				"sys/fs/cgroup/memory/kiln/sb-1/agent/memory.limit_in_bytes": "33554432",
				"sys/fs/cgroup/pids/kiln/":                                   "",
				"sys/fs/cgroup/pids/kiln/sb-1/":                              "",
				"sys/fs/cgroup/pids/kiln/sb-1/user/":                         "",
				"sys/fs/cgroup/pids/kiln/sb-1/user/pids.max":                 "16",
				"sys/fs/cgroup/pids/kiln/sb-1/agent/":                        "",
				"sys/fs/cgroup/pids/kiln/sb-1/agent/pids.max":                "8",
				"sys/fs/cgroup/cpu,cpuacct/kiln/":                            "",
				"sys/fs/cgroup/cpu,cpuacct/kiln/sb-1/":                       "",
				"sys/fs/cgroup/cpu,cpuacct/kiln/sb-1/user/":                  "",
				"sys/fs/cgroup/cpu,cpuacct/kiln/sb-1/user/cpu.cfs_period_us": "100000",
				"sys/fs/cgroup/cpu,cpuacct/kiln/sb-1/user/cpu.cfs_quota_us":  "50000",
				"sys/fs/cgroup/cpu,cpuacct/kiln/sb-1/agent/":                 "",
			},
		},
		{
			name: "v2",
			fake: newV2Fake,
			want: map[string]string{
				"sys/fs/cgroup/cgroup.subtree_control":           "+pids +cpu",
				"sys/fs/cgroup/kiln/":                            "",
				"sys/fs/cgroup/kiln/cgroup.subtree_control":      "+memory +pids +cpu",
				"sys/fs/cgroup/kiln/sb-1/":                       "",
				"sys/fs/cgroup/kiln/sb-1/cgroup.subtree_control": "+memory +pids +cpu",
				"sys/fs/cgroup/kiln/sb-1/user/":                  "",
				"sys/fs/cgroup/kiln/sb-1/user/memory.max":        "67108864",
				"sys/fs/cgroup/kiln/sb-1/user/memory.swap.max":   "0",
				"sys/fs/cgroup/kiln/sb-1/user/pids.max":          "16",
				"sys/fs/cgroup/kiln/sb-1/user/cpu.max":           "50000 100000",
				"sys/fs/cgroup/kiln/sb-1/agent/":                 "",
				"sys/fs/cgroup/kiln/sb-1/agent/memory.max":       "33554432",
				"sys/fs/cgroup/kiln/sb-1/agent/memory.swap.max":  "0",
				"sys/fs/cgroup/kiln/sb-1/agent/pids.max":         "8",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, fake := tt.fake(t)
			g, err := h.Create("sb-1", testLimits, agentLimits)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if diff := cmp.Diff(tt.want, fake.written(t)); diff != "" {
				t.Errorf("Create wrote (-want +got):\n%s", diff)
			}

			if err := g.Destroy(context.Background()); err != nil {
				t.Fatalf("Destroy: %v", err)
			}
			if err := g.Destroy(context.Background()); err != nil {
				t.Errorf("second Destroy: %v, want nil", err)
			}
			for p := range fake.written(t) {
				if strings.Contains(p, "sb-1") {
					t.Errorf("after Destroy %s is left", p)
				}
			}
			if ids, err := h.Orphans(); err != nil || len(ids) != 0 {
				t.Errorf("Orphans() after Destroy = %q, %v; want none", ids, err)
			}
		})
	}
}

func TestCreateFailsCleanly(t *testing.T) {
	t.Run("missing control file", func(t *testing.T) {
		files := map[string]string{}
		for k, v := range v1GroupFiles {
			if k != "pids.max" {
				files[k] = v
			}
		}
		h, fake := newFake(t, hybridMountinfo, map[string]string{
			"sys/fs/cgroup/cpu/": "", "sys/fs/cgroup/cpuacct/": "", "sys/fs/cgroup/memory/": "", "sys/fs/cgroup/pids/": "",
			"sys/fs/cgroup/unified/cgroup.controllers": "hugetlb\n",
		}, files)
		_, err := h.Create("sb-1", testLimits, agentLimits)
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "set "+h.Mounts.Pids+"/kiln/sb-1/user/pids.max to 16: ") {
			t.Errorf("Create error = %v, want one that names pids.max and wraps fs.ErrNotExist", err)
		}
		for p := range fake.written(t) {
			if strings.Contains(p, "sb-1") {
				t.Errorf("after failed Create %s is left", p)
			}
		}
	})

	t.Run("group exists", func(t *testing.T) {
		h, fake := newV1Fake(t)
		if _, err := h.Create("sb-1", testLimits, agentLimits); err != nil {
			t.Fatal(err)
		}
		before := fake.written(t)
		_, err := h.Create("sb-1", testLimits, agentLimits)
		if err == nil || !strings.Contains(err.Error(), "exists already") {
			t.Errorf("second Create error = %v, want exists already", err)
		}
		if diff := cmp.Diff(before, fake.written(t)); diff != "" {
			t.Errorf("failed second Create changed the tree (-before +after):\n%s", diff)
		}
	})

	t.Run("invalid arguments", func(t *testing.T) {
		h, fake := newV1Fake(t)
		for _, c := range []struct {
			id          string
			user, agent Limits
		}{
			{"", testLimits, agentLimits},
			{"../x", testLimits, agentLimits},
			{"sb-1", Limits{MemoryBytes: 1 << 20, Pids: 16}, agentLimits},
			{"sb-1", testLimits, Limits{MemoryBytes: 64 << 20}},
		} {
			if _, err := h.Create(c.id, c.user, c.agent); !errors.Is(err, ErrInvalid) {
				t.Errorf("Create(%q, %+v, %+v) error = %v, want ErrInvalid", c.id, c.user, c.agent, err)
			}
		}
		if got := fake.written(t); len(got) != 0 {
			t.Errorf("invalid Create calls wrote %v", got)
		}
	})
}

func TestLimitsValidate(t *testing.T) {
	tests := []struct {
		limits Limits
		ok     bool
	}{
		{Limits{MemoryBytes: 16 << 20, Pids: 8}, true},
		{Limits{MemoryBytes: 1 << 30, Pids: 1024, CPUMillis: 10}, true},
		{Limits{MemoryBytes: 1 << 30, Pids: 1024, CPUMillis: 4000}, true},
		{Limits{MemoryBytes: 16<<20 - 1, Pids: 8}, false},
		{Limits{Pids: 8}, false},
		{Limits{MemoryBytes: 16 << 20, Pids: 7}, false},
		{Limits{MemoryBytes: 16 << 20}, false},
		{Limits{MemoryBytes: 16 << 20, Pids: 5 << 20}, false},
		{Limits{MemoryBytes: 16 << 20, Pids: 8, CPUMillis: 9}, false},
		{Limits{MemoryBytes: 16 << 20, Pids: 8, CPUMillis: -1}, false},
		{Limits{MemoryBytes: 16 << 20, Pids: 8, CPUMillis: 2_000_000}, false},
	}
	for _, tt := range tests {
		err := tt.limits.Validate()
		if tt.ok && err != nil || !tt.ok && !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v.Validate() = %v, want ok %v", tt.limits, err, tt.ok)
		}
	}
}

func TestValidID(t *testing.T) {
	long := strings.Repeat("a", 64)
	for id, ok := range map[string]bool{
		"a": true, "sb-1": true, "0123-abc": true, long: true,
		"": false, long + "a": false, "A": false, "a_b": false, "a/b": false, "..": false, ".": false, "a b": false, "é": false,
	} {
		if err := validID(id); (err == nil) != ok {
			t.Errorf("validID(%q) = %v, want ok %v", id, err, ok)
		}
	}
}

func TestAddAgent(t *testing.T) {
	h, fake := newV1Fake(t)
	g, err := h.Create("sb-1", testLimits, agentLimits)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.AddAgent(4242); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for p, v := range fake.written(t) {
		if strings.HasSuffix(p, "cgroup.procs") {
			got[p] = v
		}
	}
	want := map[string]string{
		"sys/fs/cgroup/memory/kiln/sb-1/agent/cgroup.procs":  "4242",
		"sys/fs/cgroup/pids/kiln/sb-1/agent/cgroup.procs":    "4242",
		"sys/fs/cgroup/cpu/kiln/sb-1/agent/cgroup.procs":     "4242",
		"sys/fs/cgroup/cpuacct/kiln/sb-1/agent/cgroup.procs": "4242",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("AddAgent wrote (-want +got):\n%s", diff)
	}
	if err := g.AddAgent(0); !errors.Is(err, ErrInvalid) {
		t.Errorf("AddAgent(0) = %v, want ErrInvalid", err)
	}
}

func TestDestroyGivesUpWithContext(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("killing processes is implemented on Linux only")
	}
	h, fake := newV1Fake(t)
	g, err := h.Create("sb-1", testLimits, agentLimits)
	if err != nil {
		t.Fatal(err)
	}
	// A pid above the kernel's maximum, listed in the fake cgroup.procs: no
	// kill removes it, so Destroy must give up when ctx is done.
	fake.set(t, "sys/fs/cgroup/pids/kiln/sb-1/user/cgroup.procs", "4194304\n")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = g.Destroy(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 processes still alive") {
		t.Errorf("Destroy with a process that stays = %v, want deadline exceeded and 1 process alive", err)
	}
}
