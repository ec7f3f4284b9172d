package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// An unknown --backend is refused with the allowed names, before any
// sandbox or engine is touched (so without root or Docker).
func TestBenchBackendUnknown(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"bench", "--backend", "podman"}, strings.NewReader(""), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "allowed are native and docker") {
		t.Fatalf("kiln bench --backend podman: %v; want an error naming native and docker", err)
	}
	err = run(context.Background(), []string{"bench", "--backend", "docker", "--pool", "0"}, strings.NewReader(""), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "--pool") {
		t.Fatalf("kiln bench --backend docker --pool 0: %v; want an error naming --pool", err)
	}
}
