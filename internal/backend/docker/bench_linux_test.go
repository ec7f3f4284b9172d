package docker

import (
	"context"
	"os"
	"testing"

	"github.com/moby/moby/client"

	"github.com/kiln-dev/kiln/internal/agent"
)

func TestMain(m *testing.M) {
	agent.Dispatch() // the native backend's sandboxes re-execute this binary (the benchmark)
	code := m.Run()
	removeTestImage()
	os.Exit(code)
}

// testImage is the image the tests built from this test binary; it is
// removed at the end, so that test runs do not pile images up in the
// engine (each test binary has its own hash, so its own tag).
var testImage string

func removeTestImage() {
	if testImage == "" {
		return
	}
	b, err := New(context.Background())
	if err != nil {
		return
	}
	defer b.Close()
	b.cli.ImageRemove(context.Background(), testImage, client.ImageRemoveOptions{Force: true})
}
