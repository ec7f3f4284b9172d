package main

import (
	"slices"
	"strings"
	"testing"
)

func TestParseDensitySteps(t *testing.T) {
	got, err := parseSteps("10, 100,1000")
	if err != nil || !slices.Equal(got, []int{10, 100, 1000}) {
		t.Errorf("got %v, %v; want [10 100 1000]", got, err)
	}
	for _, bad := range []string{"", "10,x", "0", "100,10", "10,10", "-5"} {
		if _, err := parseSteps(bad); err == nil || !strings.Contains(err.Error(), "ascending session counts") {
			t.Errorf("%q: got %v, want an error naming what is allowed", bad, err)
		}
	}
}
