package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/cgroups"
)

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var ds []time.Duration
		for _, n := range ns {
			ds = append(ds, time.Duration(n)*time.Millisecond)
		}
		return ds
	}
	for _, tc := range []struct {
		ds   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 90, 0},
		{ms(7), 90, 7 * time.Millisecond},
		{ms(10, 1, 9, 2, 8, 3, 7, 4, 6, 5), 90, 9 * time.Millisecond},
		{ms(10, 1, 9, 2, 8, 3, 7, 4, 6, 5), 50, 5 * time.Millisecond},
		{ms(10, 1, 9, 2, 8, 3, 7, 4, 6, 5), 100, 10 * time.Millisecond},
		{ms(10, 1, 9, 2, 8, 3, 7, 4, 6, 5), 0, 1 * time.Millisecond},
		{ms(3, 1, 2), 90, 3 * time.Millisecond},
	} {
		if got := Percentile(tc.ds, tc.p); got != tc.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", tc.ds, tc.p, got, tc.want)
		}
	}
}

func TestGroupOf(t *testing.T) {
	const v1 = "12:pids:/kiln/8bab948c8d66ff21/user\n" +
		"5:cpu,cpuacct:/kiln/8bab948c8d66ff21/user\n" +
		"4:memory:/kiln/8bab948c8d66ff21/agent\n" +
		"0::/\n"
	for _, tc := range []struct {
		name    string
		cgroup  string
		v       cgroups.Version
		want    string
		wantErr string
	}{
		{"v1", v1, cgroups.V1, "kiln/8bab948c8d66ff21", ""},
		{"v2", "0::/kiln/4e6ffeb89b97e438/user\n", cgroups.V2, "kiln/4e6ffeb89b97e438", ""},
		{"v1 line on v2", "4:memory:/kiln/x/user\n0::/user.slice\n", cgroups.V2, "", "not a sandbox's"},
		{"not a sandbox", "4:memory:/user.slice\n", cgroups.V1, "", "not a sandbox's"},
		{"the root group itself", "4:memory:/kiln\n", cgroups.V1, "", "not a sandbox's"},
		{"no memory line", "12:pids:/kiln/a/user\n", cgroups.V1, "", "no memory cgroup"},
	} {
		got, err := groupOf(tc.cgroup, tc.v, "kiln")
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: got %q, %v; want an error with %q", tc.name, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestMetricValue(t *testing.T) {
	const text = "# HELP kiln_pool_ready Sandboxes created ahead of need.\n" +
		"# TYPE kiln_pool_ready gauge\n" +
		"kiln_pool_ready_total 9\n" +
		"kiln_pool_ready 3\n"
	got, err := metricValue(strings.NewReader(text), "kiln_pool_ready")
	if err != nil || got != 3 {
		t.Errorf("got %d, %v; want 3", got, err)
	}
	if _, err := metricValue(strings.NewReader("kiln_pool_ready_total 9\n"), "kiln_pool_ready"); err == nil {
		t.Error("a missing metric was found")
	}
}

func TestParseStatus(t *testing.T) {
	const status = "Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t30121\nPid:\t30121\nPPid:\t30078\n" +
		"Uid:\t1200001000\t1200001000\t1200001000\t1200001000\nGid:\t1200001000\t1200001000\t1200001000\t1200001000\n"
	ppid, uid, err := parseStatus([]byte(status))
	if err != nil || ppid != 30078 || uid != 1200001000 {
		t.Errorf("got ppid %d, uid %d, %v; want 30078, 1200001000", ppid, uid, err)
	}
	if _, _, err := parseStatus([]byte("Name:\tx\nPPid:\t1\n")); err == nil {
		t.Error("a status without Uid parsed")
	}
}

func TestKBField(t *testing.T) {
	const rollup = "55d0c0a00000-7ffd8f5f1000 ---p 00000000 00:00 0    [rollup]\nRss:               12996 kB\nPss:                7384 kB\nPss_Dirty:          5000 kB\n"
	got, err := kbField([]byte(rollup), "Pss")
	if err != nil || got != 7384*1024 {
		t.Errorf("Pss: got %d, %v; want %d", got, err, 7384*1024)
	}
	if _, err := kbField([]byte("Pss: 12\n"), "Pss"); err == nil {
		t.Error("a line without its unit parsed")
	}
}
