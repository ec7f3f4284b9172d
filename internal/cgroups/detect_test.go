package cgroups

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestDetectFrom(t *testing.T) {
	tests := []struct {
		name      string
		mountinfo string
		files     map[string]string // relative to the fake root; "x/" is a directory
		// want holds the mounts relative to the fake root.
		want    *Host
		wantErr []string // substrings of the error
	}{
		{
			name:      "v1 hybrid",
			mountinfo: hybridMountinfo,
			files:     map[string]string{"sys/fs/cgroup/unified/cgroup.controllers": "hugetlb\n"},
			want: &Host{Version: V1, RootGroup: "kiln", Mounts: Mounts{
				Memory: "sys/fs/cgroup/memory", Pids: "sys/fs/cgroup/pids",
				CPU: "sys/fs/cgroup/cpu", CPUAcct: "sys/fs/cgroup/cpuacct",
			}},
		},
		{
			name:      "v1 with cpu,cpuacct co-mounted",
			mountinfo: comountedMountinfo,
			want: &Host{Version: V1, RootGroup: "kiln", Mounts: Mounts{
				Memory: "sys/fs/cgroup/memory", Pids: "sys/fs/cgroup/pids",
				CPU: "sys/fs/cgroup/cpu,cpuacct", CPUAcct: "sys/fs/cgroup/cpu,cpuacct",
			}},
		},
		{
			name:      "v2",
			mountinfo: v2Mountinfo,
			files:     map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma misc\n"},
			want: &Host{Version: V2, RootGroup: "kiln", Mounts: Mounts{
				Memory: "sys/fs/cgroup", Pids: "sys/fs/cgroup", CPU: "sys/fs/cgroup", CPUAcct: "sys/fs/cgroup",
			}},
		},
		{
			name:      "v2 preferred over v1",
			mountinfo: hybridMountinfo,
			files:     map[string]string{"sys/fs/cgroup/unified/cgroup.controllers": "memory pids cpu\n"},
			want: &Host{Version: V2, RootGroup: "kiln", Mounts: Mounts{
				Memory: "sys/fs/cgroup/unified", Pids: "sys/fs/cgroup/unified", CPU: "sys/fs/cgroup/unified", CPUAcct: "sys/fs/cgroup/unified",
			}},
		},
		{
			name:      "v1 hybrid without pids and cpuacct",
			mountinfo: dropLines(hybridMountinfo, "rw,pids", "rw,cpuacct"),
			files:     map[string]string{"sys/fs/cgroup/unified/cgroup.controllers": "hugetlb\n"},
			wantErr: []string{
				"sys/fs/cgroup/unified lacks memory, pids, cpu (has hugetlb)",
				"cgroup v1 has no writable hierarchy for pids, cpuacct",
			},
		},
		{
			name:      "v2 without pids, no v1",
			mountinfo: v2Mountinfo,
			files:     map[string]string{"sys/fs/cgroup/cgroup.controllers": "cpu memory\n"},
			wantErr: []string{
				"sys/fs/cgroup lacks pids (has cpu, memory)",
				"cgroup v1 has no writable hierarchy for memory, pids, cpu, cpuacct",
			},
		},
		{
			name:      "v1 memory read-only",
			mountinfo: strings.Replace(comountedMountinfo, "/sys/fs/cgroup/memory rw,", "/sys/fs/cgroup/memory ro,", 1),
			wantErr: []string{
				"no cgroup2 mount",
				"no writable hierarchy for memory (read-only: memory at ",
			},
		},
		{
			name:      "no cgroups at all",
			mountinfo: "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n",
			wantErr:   []string{"no cgroup2 mount", "no writable hierarchy for memory, pids, cpu, cpuacct"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for p, content := range tt.files {
				path := filepath.Join(root, p)
				must(t, os.MkdirAll(filepath.Dir(path), 0o755))
				must(t, os.WriteFile(path, []byte(content), 0o644))
			}
			got, err := DetectFrom(strings.NewReader(tt.mountinfo), root)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("DetectFrom = %+v, want error", got)
				}
				if !errors.Is(err, errors.ErrUnsupported) {
					t.Errorf("error %v does not wrap errors.ErrUnsupported", err)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("DetectFrom: %v", err)
			}
			m := &tt.want.Mounts
			for _, p := range []*string{&m.Memory, &m.Pids, &m.CPU, &m.CPUAcct} {
				*p = filepath.Join(root, *p)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreUnexported(Host{})); diff != "" {
				t.Errorf("DetectFrom mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func dropLines(s string, containing ...string) string {
	var keep []string
	for line := range strings.Lines(s) {
		drop := false
		for _, c := range containing {
			drop = drop || strings.Contains(line, c)
		}
		if !drop {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "")
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		name string
		host Host
		want string
	}{
		{
			name: "v1",
			host: Host{Version: V1, RootGroup: "kiln", Mounts: Mounts{
				Memory: "/sys/fs/cgroup/memory", Pids: "/sys/fs/cgroup/pids",
				CPU: "/sys/fs/cgroup/cpu", CPUAcct: "/sys/fs/cgroup/cpuacct",
			}},
			want: "cgroup v1 (memory at /sys/fs/cgroup/memory; pids at /sys/fs/cgroup/pids; cpu at /sys/fs/cgroup/cpu; cpuacct at /sys/fs/cgroup/cpuacct); sandbox groups under kiln/",
		},
		{
			name: "v1 co-mounted",
			host: Host{Version: V1, RootGroup: "kiln", Mounts: Mounts{
				Memory: "/sys/fs/cgroup/memory", Pids: "/sys/fs/cgroup/pids",
				CPU: "/sys/fs/cgroup/cpu,cpuacct", CPUAcct: "/sys/fs/cgroup/cpu,cpuacct",
			}},
			want: "cgroup v1 (memory at /sys/fs/cgroup/memory; pids at /sys/fs/cgroup/pids; cpu,cpuacct at /sys/fs/cgroup/cpu,cpuacct); sandbox groups under kiln/",
		},
		{
			name: "v2",
			host: Host{Version: V2, RootGroup: "sandboxes", Mounts: Mounts{
				Memory: "/sys/fs/cgroup", Pids: "/sys/fs/cgroup", CPU: "/sys/fs/cgroup", CPUAcct: "/sys/fs/cgroup",
			}},
			want: "cgroup v2 (memory,pids,cpu at /sys/fs/cgroup); sandbox groups under sandboxes/",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.host.Describe(); got != tt.want {
				t.Errorf("Describe() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseMountinfo(t *testing.T) {
	in := `40 31 0:37 /sub\040dir /mnt/with\040space\134 ro,relatime shared:3 master:1 - cgroup cgroup rw,cpu,cpuacct
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 none rw
`
	got, err := parseMountinfo(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []mount{
		{root: "/sub dir", mountPoint: `/mnt/with space\`, readOnly: true, fstype: "cgroup", superOptions: "rw,cpu,cpuacct"},
		{root: "/", mountPoint: "/sys/fs/cgroup/unified", fstype: "cgroup2", superOptions: "rw"},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(mount{})); diff != "" {
		t.Errorf("parseMountinfo mismatch (-want +got):\n%s", diff)
	}

	for _, bad := range []string{"1 2 3\n", "1 2 0:1 / /x rw - cgroup\n"} {
		if _, err := parseMountinfo(strings.NewReader(bad)); err == nil {
			t.Errorf("parseMountinfo(%q) succeeded, want error", bad)
		}
	}
}

func FuzzParseMountinfo(f *testing.F) {
	f.Add(hybridMountinfo)
	f.Add(comountedMountinfo)
	f.Add(v2Mountinfo)
	f.Add(`1 2 0:1 /a\040b /c\1 rw - cgroup x rw,cpu` + "\n")
	f.Fuzz(func(t *testing.T, in string) {
		mounts, err := parseMountinfo(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, m := range mounts {
			if m.fstype == "" || m.mountPoint == "" {
				t.Errorf("parsed %q into an empty field: %+v", in, m)
			}
		}
	})
}

func TestOrphansAndGroup(t *testing.T) {
	h, _ := newV1Fake(t)
	got, err := h.Orphans()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("Orphans() before any Create = %q, want none", got)
	}
	for _, id := range []string{"b", "a-1"} {
		if _, err := h.Create(id, testLimits, DefaultAgentLimits()); err != nil {
			t.Fatal(err)
		}
	}
	// Something kiln would not make: ignored.
	must(t, os.Mkdir(filepath.Join(h.Mounts.Pids, "kiln", "Not_An_ID"), 0o755))

	got, err = h.Orphans()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a-1", "b"}, got); diff != "" {
		t.Errorf("Orphans() mismatch (-want +got):\n%s", diff)
	}

	if _, err := h.Group("Not_An_ID"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Group(bad id) error = %v, want ErrInvalid", err)
	}
	h.RootGroup = "../etc"
	if _, err := h.Orphans(); !errors.Is(err, ErrInvalid) {
		t.Errorf("Orphans() with root group ../etc: error = %v, want ErrInvalid", err)
	}
}
