package archive

import (
	"strings"
	"testing"
)

func TestCleanName(t *testing.T) {
	for _, tc := range []struct{ in, want, rule string }{
		{"a.txt", "a.txt", ""},
		{"dir/", "dir", ""},
		{"./a/./b", "a/b", ""},
		{"a//b", "a/b", ""},
		{"./", ".", ""},
		{".", ".", ""},
		{"ab:c", "ab:c", ""}, // past the second byte a colon is like any other
		{"", "", "empty"},
		{"../x", "", ".."},
		{"a/../../x", "", ".."},
		{"a/..", "", ".."},
		{"/etc/passwd", "", "absolute"},
		{"a\\b", "", "backslash"},
		{"..\\..\\x", "", "backslash"},
		{"C:/x", "", "drive letter"},
		{"c:x", "", "drive letter"},
		{"a\x00b", "", "NUL"},
		{strings.Repeat("a/", 2049), "", "longer than 4096"},
		{strings.Repeat("a", 256), "", "component"},
	} {
		got, rule := cleanName(tc.in)
		if got != tc.want || (tc.rule == "") != (rule == "") || !strings.Contains(rule, tc.rule) {
			t.Errorf("cleanName(%.30q) = %q, %q; want %q, a rule containing %q", tc.in, got, rule, tc.want, tc.rule)
		}
	}
}

func TestTree(t *testing.T) {
	for _, tc := range []struct {
		names []string // a trailing slash makes a directory
		rule  string   // in the error for the last name; "" for none
	}{
		{[]string{"a/b", "a/", "a/c/"}, ""},
		{[]string{"a/", "a/"}, "twice"},
		{[]string{"a", "a"}, "twice"},
		{[]string{"a/", "a"}, "directory too"},
		{[]string{"a/b", "a"}, "directory too"},
		{[]string{"a", "a/"}, "twice"},
		{[]string{"a", "a/b/c"}, `under "a"`},
	} {
		tr := newTree()
		var err error
		for _, n := range tc.names {
			dir := strings.HasSuffix(n, "/")
			if err = tr.add(n, strings.TrimSuffix(n, "/"), dir); err != nil {
				break
			}
		}
		if (tc.rule == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.rule) {
			t.Errorf("names %q: error %v; want one containing %q", tc.names, err, tc.rule)
		}
	}
}
