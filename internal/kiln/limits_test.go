package kiln

import (
	"strings"
	"testing"
	"time"
)

func TestFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{64 * MiB, "64 MiB"}, {3 * GiB / 2, "1.5 GiB"}, {512, "512 bytes"},
		{1536, "1.5 KiB"}, {1000, "1000 bytes"}, {16 * GiB, "16 GiB"},
	} {
		if got := FormatBytes(tc.n); got != tc.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    Limits
		want string // substring of the error; "" for valid
	}{
		{"zero is defaults", Limits{}, ""},
		{"defaults", DefaultLimits(), ""},
		{"memory too small", Limits{MemoryBytes: 1 * MiB}, "memory limit 1 MiB is outside the allowed range 32 MiB to 16 GiB"},
		{"negative pids", Limits{Pids: -1}, "pids limit -1 is outside"},
		{"timeout too long", Limits{Timeout: 48 * time.Hour}, "timeout 48h0m0s is outside the allowed range"},
		{"cpu too small", Limits{CPUMillis: 1}, "cpu limit 1 millicpus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.l.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			case tc.want != "" && KindOf(err) != Invalid:
				t.Errorf("kind = %v, want invalid", KindOf(err))
			}
		})
	}
}

func TestWithDefaultsKeepsGivenValues(t *testing.T) {
	l := Limits{MemoryBytes: 64 * MiB}.WithDefaults()
	if l.MemoryBytes != 64*MiB || l.Pids != DefaultLimits().Pids || l.Timeout != DefaultLimits().Timeout {
		t.Errorf("WithDefaults = %+v", l)
	}
}
