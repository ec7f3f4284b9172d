//go:build linux

package security

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/engine"
)

// The suite on the Kubernetes backend (KILN_TEST_BACKEND=kubernetes): its
// sandboxes are Pods on the test cluster (scripts/k8s/up), made by
// internal/backend/kubernetes. What needs the cluster is in
// kubernetes_cluster_test.go, built only with -tags kubernetes; without
// the tag the suite builds and runs as before, and asking for kubernetes
// is a set-up error that says so.

// kubeBackend is what the harness asks of the Kubernetes suite.
type kubeBackend interface {
	backend() engine.Backend
	create(ctx context.Context, spec native.Spec) (*box, error)
	destroy(b *box) error
	checkGone(t *testing.T, b *box)
	leftovers() ([]leftover, error)
	userProcs(t *testing.T, b *box) []hostProc
	posture(t *testing.T, b *box, pid int)
	selfCheck(t *testing.T)
	// startCost is how long a cold sandbox (a Pod) takes to start,
	// measured when the suite began: engine.Run's total holds it
	// (requireStoppedBy).
	startCost() time.Duration
	close()
}

// kubeSettle is how long after DestroySandbox the host may still hold
// something of a Pod. Destroy returns once the API server has deleted the
// Pod; the kubelet then stops its containers and unmounts its emptyDirs
// (tmpfs on the host) by itself, which took over 2 s on this loaded
// 2-core node. Whatever is left after kubeSettle fails the case, as on
// native and Docker after 2 s.
const kubeSettle = 30 * time.Second

// newKubeSuiteFunc is set by kubernetes_cluster_test.go's init.
var newKubeSuiteFunc func() (kubeBackend, error)

func newKubeSuite() (kubeBackend, error) {
	if newKubeSuiteFunc == nil {
		return nil, errors.New("this test binary has no Kubernetes suite: build it with -tags kubernetes")
	}
	return newKubeSuiteFunc()
}

// The prefixes of the only skips scripts/k8s/ci accepts from the suite on
// Kubernetes, and then only for the exact test names it lists.
const (
	kubeNotApplicable = "not applicable on Kubernetes: "
	kubeGapPrefix     = "known gap of the Kubernetes backend (issue 15): "
)

// skipOnKube skips a case that has no meaning in a Pod. The reasons are
// the Docker backend's (skipOnDocker): a Pod is a container of the same
// image.
func skipOnKube(t *testing.T, why string) {
	t.Helper()
	t.Skip(kubeNotApplicable + why)
}

// kubeGap is dockerGap on Kubernetes.
func kubeGap(t *testing.T, gaps ...string) {
	t.Helper()
	t.Skip(kubeGapPrefix + strings.Join(gaps, "; "))
}

// containerBackend names the container backend the suite runs on, for
// its logs.
func containerBackend() string {
	if theSuite != nil && theSuite.kube != nil {
		return "Kubernetes"
	}
	return "Docker"
}

// kubeNotApplicableTests are the cases that have no meaning in a Pod, each
// with why; env skips them on Kubernetes before they start.
var kubeNotApplicableTests = map[string]string{
	"TestUsrLocksPrivate":   whyPodUsr,
	"TestUsrInotifyPrivate": whyPodUsr,
}

const whyPodUsr = "a Pod's /usr is the runtimes image's own copy in its root overlay, no mount of the host's /usr: no inode of /usr is shared with the host, whose locks or inotify events could pass through it"

// kubeKnownGapTests are the cases that fail on Kubernetes because of a gap
// of the Kubernetes backend against native, each with what the gap is:
// env skips them on Kubernetes, naming the gap, so that CI lists them
// (scripts/k8s/ci: SECURITY_KNOWN_GAPS) until the backend closes them.
// A gap shown by one line of a probe is a kubeLines entry instead: its
// test asserts every other line first.
var kubeKnownGapTests = map[string]string{
	// The agent is the Pod's PID 1, in the container's cgroups with user
	// code: the container's memory limit is the agent's too, and the
	// pids limit is the node's per Pod, not the session's.
	"TestAgentSurvivesBombs": "a Python fork bomb in a sandbox of 64 MiB is not ended within 5 s of its cancel: the session's pids limit (32) is not applied in a Pod, and the node's per-Pod pids limit (256) of Python processes outgrows 64 MiB, so the Pod, agent included, stalls in memory reclaim",
	"TestInodeExhaustion":    "creating files without end in /workspace ends the sandbox: engine.Run fails with 'the sandbox stopped answering: agent connection closed' instead of ENOSPC",
	"TestDiskFill":           "the workspace emptyDir on the node's disk has no hard size (its sizeLimit is the kubelet's eviction, later): filling /workspace runs into the 10 s timeout instead of ENOSPC (/tmp, a memory emptyDir, gives ENOSPC at its size)",
	"TestHostFactsMasked":    "the Pod's /proc masks only the runtime's default paths: /proc/kallsyms, locks, cmdline, config.gz, diskstats, softirqs, partitions, swaps, buddyinfo, zoneinfo, key-users and pressure show the host's, where native and the Docker backend mask them",
}

// kubeRunGapsEnv, when set, runs the cases of kubeKnownGapTests instead of
// skipping them: to see whether the backend still has the gap.
const kubeRunGapsEnv = "KILN_K8S_RUN_GAPS"

// kubeGate skips a test listed above. env calls it, and so does every
// attack (attackRun), so a subtest that runs one is listed by its own name.
func kubeGate(t *testing.T) {
	t.Helper()
	if why, ok := kubeNotApplicableTests[t.Name()]; ok {
		t.Skip(kubeNotApplicable + why)
	}
	if why, ok := kubeKnownGapTests[t.Name()]; ok && os.Getenv(kubeRunGapsEnv) == "" {
		t.Skip(kubeGapPrefix + why)
	}
}
