package workspace

import (
	"strings"
	"testing"
)

func TestValidID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"0", true},
		{"deadbeef", true},
		{"0123456789abcdef", true},
		{strings.Repeat("a", 64), true},
		{"", false},
		{strings.Repeat("a", 65), false},
		{"DEADBEEF", false},
		{"g", false},
		{".", false},
		{"..", false},
		{"a/b", false},
		{"../ab", false},
		{"ab ", false},
		{"ab\x00", false},
		{"ab\n", false},
		{"-ab", false},
		{"é", false},
	} {
		if err := validID(tc.id); (err == nil) != tc.ok {
			t.Errorf("validID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
	}
}
