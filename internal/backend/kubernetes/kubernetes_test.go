//go:build kubernetes && linux

// These tests need a real cluster: scripts/k8s/up, then
// go test -tags kubernetes ./internal/backend/kubernetes/ (as root, with
// CGO_ENABLED=0: the test binary is the agent in the Pod). Without the
// tag go test neither runs nor skips them.
package kubernetes

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/backend/backendtest"
	"github.com/kiln-dev/kiln/internal/kiln"
	"github.com/kiln-dev/kiln/internal/protocol"
)

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

var testImage string

// testBackend is the backend on the test cluster with this test binary
// as the agent, in the runtimes image imported into the cluster's
// containerd (no registry).
func testBackend(t testing.TB) *Backend {
	t.Helper()
	ctx := context.Background()
	if testImage == "" {
		exe, _ := os.Executable()
		t0 := time.Now()
		ref, built, err := BuildImage(ctx, ImageConfig{Agent: exe, Containerd: env("KILN_K8S_CONTAINERD", "/run/kspike/containerd.sock")})
		if err != nil {
			t.Fatalf("the runtimes image (is the test cluster up? scripts/k8s/up): %v", err)
		}
		t.Logf("runtimes image %s (imported now: %v) in %v", ref, built, time.Since(t0).Round(time.Millisecond))
		testImage = ref
	}
	b, err := New(ctx, env("KUBECONFIG", "/var/lib/kspike/kubeconfig"), Options{Image: testImage, PullPolicy: corev1.PullNever})
	if err != nil {
		t.Fatalf("no test cluster (scripts/k8s/up brings it up): %v", err)
	}
	b.SetOwner(t.Name())
	t.Cleanup(func() { b.Close() })
	return b
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, testBackend(t))
}

// The Pod has the security of issue 15, and requests and limits from the
// session's limits.
func TestPodSecurity(t *testing.T) {
	b := testBackend(t)
	sb, agent := backendtest.Sandbox(t, b, backend.Spec{})
	p, err := b.cs.CoreV1().Pods(b.opt.Namespace).Get(context.Background(), "kiln-"+sb.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, c := p.Spec, p.Spec.Containers[0]
	sc := c.SecurityContext
	check := func(what string, ok bool) {
		if !ok {
			t.Errorf("%s does not hold", what)
		}
	}
	check("runAsNonRoot", *s.SecurityContext.RunAsNonRoot && *sc.RunAsNonRoot)
	check("allowPrivilegeEscalation false", !*sc.AllowPrivilegeEscalation)
	check("capabilities drop ALL", slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) && len(sc.Capabilities.Add) == 0)
	check("readOnlyRootFilesystem", *sc.ReadOnlyRootFilesystem)
	check("seccomp RuntimeDefault", s.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault)
	check("automountServiceAccountToken false", !*s.AutomountServiceAccountToken)
	check("enableServiceLinks false", !*s.EnableServiceLinks)
	check("no hostNetwork", !s.HostNetwork && !s.HostPID && !s.HostIPC)
	check("memory limit 512Mi", c.Resources.Limits.Memory().Value() == 512<<20 && c.Resources.Requests.Memory().Value() == 512<<20)
	cpu := int64(0)
	for _, c := range s.Containers {
		cpu += c.Resources.Limits.Cpu().MilliValue()
		check(c.Name+"'s requests equal its limits", c.Resources.Requests.Cpu().Equal(*c.Resources.Limits.Cpu()) && c.Resources.Requests.Memory().Equal(*c.Resources.Limits.Memory()))
	}
	check("cpu limit 1 for the Pod", cpu == 1000)
	// Guaranteed: the agent's oom_score_adj is far below what it gives
	// user processes, so the OOM killer takes them first.
	check("QoS class Guaranteed", p.Status.QOSClass == corev1.PodQOSGuaranteed)
	for _, v := range s.Volumes {
		if v.HostPath != nil {
			t.Errorf("hostPath volume %q", v.Name)
		}
	}
	// Inside: no service-account token, and the default-deny policy keeps
	// the API server (by the bridge address and by its Service) out of
	// reach; a Pod without kiln's labels reaches both.
	script := `ls /var/run/secrets/kubernetes.io 2>/dev/null && echo token
for a in 10.244.0.1/16443 10.96.0.1/443; do timeout 5 bash -c "exec 3<>/dev/tcp/$a" 2>/dev/null && echo "reached $a"; done; true`
	var out bytes.Buffer
	if _, err := agent.Exec(context.Background(), protocol.Exec{Argv: []string{"/bin/sh", "-c", script}, TimeoutMs: 60_000, OutputBytes: 1 << 16}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "" {
		t.Errorf("from the sandbox: %q; want no token and no API server", out.String())
	}
}

// Reaping goes by label: a Pod kiln did not make, and another kiln's
// sandbox, are neither listed nor reaped.
func TestReapByLabel(t *testing.T) {
	b := testBackend(t)
	other := testBackend(t)
	other.SetOwner("another kiln")
	ctx := context.Background()
	mine, err := b.CreateSandbox(ctx, backend.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := other.CreateSandbox(ctx, backend.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.DestroySandbox(ctx, theirs.ID)
	// A Pod kiln did not make: the same image, none of kiln's labels.
	stranger := b.pod("stranger", kiln.DefaultLimits(), nil, "", nil)
	stranger.Labels = map[string]string{"app": "not-kiln"}
	pods := b.cs.CoreV1().Pods(b.opt.Namespace)
	if _, err := pods.Create(ctx, stranger, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer pods.Delete(ctx, stranger.Name, metav1.DeleteOptions{})
	n, err := b.Reap(ctx)
	if err != nil || n != 1 {
		t.Fatalf("reap: %d, %v; want 1 (only %s)", n, err, mine.ID)
	}
	if _, err := pods.Get(ctx, stranger.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("a Pod without kiln's labels after reaping: %v", err)
	}
	if ids, _ := b.List(ctx); len(ids) != 0 {
		t.Errorf("own sandboxes after reaping: %v; want none", ids)
	}
	ids, _ := other.List(ctx)
	if !slices.Equal(ids, []string{theirs.ID}) {
		t.Errorf("another kiln's sandboxes after reaping: %v; want [%s]", ids, theirs.ID)
	}
}

// TestFigures logs, without asserting (a shared machine's timing is no
// test), the medians of Pod create → agent ready and of a warm command's
// round trip through the exec stream.
func TestFigures(t *testing.T) {
	b := testBackend(t)
	ctx := context.Background()
	var creates, cells []time.Duration
	for range 5 {
		t0 := time.Now()
		// One at a time: each Pod requests a whole CPU of the two.
		sb, err := b.CreateSandbox(ctx, backend.Spec{})
		if err != nil {
			t.Fatal(err)
		}
		creates = append(creates, time.Since(t0))
		c, _ := b.Connect(ctx, sb.ID)
		for range 10 {
			t1 := time.Now()
			var out bytes.Buffer
			if _, err := c.Exec(ctx, protocol.Exec{Argv: []string{"/bin/true"}, TimeoutMs: 60_000, OutputBytes: 1 << 10}, &out, &out); err != nil {
				t.Fatal(err)
			}
			cells = append(cells, time.Since(t1))
		}
		if err := b.DestroySandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
	}
	median := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	t.Logf("Pod create → agent ready: median %v of %d (min %v, max %v)", median(creates), len(creates), creates[0], creates[len(creates)-1])
	t.Logf("warm /bin/true through the exec stream: median %v of %d", median(cells), len(cells))
}

// A sandbox cannot take the node's pids: the Pod's pids cgroup (the
// kubelet's podPidsLimit, 256 on the test cluster) stops a fork bomb,
// and the agent still answers afterwards.
func TestPodPidsLimit(t *testing.T) {
	b := testBackend(t)
	_, agent := backendtest.Sandbox(t, b, backend.Spec{})
	ctx := context.Background()
	// Children that wait, until a fork fails; then the count, and all killed.
	script := `import os, signal
pids = []
try:
    while len(pids) < 5000:
        pid = os.fork()
        if pid == 0:
            signal.pause()
            os._exit(0)
        pids.append(pid)
except OSError:
    pass
for p in pids:
    os.kill(p, signal.SIGKILL)
    os.waitpid(p, 0)
print(len(pids))
`
	var out bytes.Buffer
	if _, err := agent.Exec(ctx, protocol.Exec{Argv: []string{"/usr/bin/python3", "-c", script}, TimeoutMs: 120_000, OutputBytes: 1 << 16}, &out, &out); err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil || n >= 256 {
		t.Errorf("processes started in the sandbox: %q; want fewer than the Pod's 256 pids (scripts/k8s/up)", out.String())
	}
	t.Logf("a fork bomb made %d processes before the Pod's pids limit stopped it", n)
	out.Reset()
	if _, err := agent.Exec(ctx, protocol.Exec{Argv: []string{"/bin/echo", "alive"}, TimeoutMs: 60_000, OutputBytes: 1 << 10}, &out, &out); err != nil || out.String() != "alive\n" {
		t.Errorf("the agent after the fork bomb: %q, %v", out.String(), err)
	}
}

// A sandbox asks for an extended resource (a GPU) the administrator
// allows: its Pod requests and is limited to it and is scheduled where a
// node has it; asking for more than any node has fails at once, saying
// so, and asking for one not allowed names what is.
func TestExtendedResources(t *testing.T) {
	b := testBackend(t)
	ctx := context.Background()
	const gpu = "example.com/kiln-test-gpu"
	advertise(t, b, gpu, 2)
	b.opt.ExtendedResources = map[string]int64{gpu: 0}
	small := kiln.Limits{CPUMillis: 100, MemoryBytes: 128 * kiln.MiB}

	sb, agent := backendtest.Sandbox(t, b, backend.Spec{Limits: small, Resources: map[string]int64{gpu: 1}})
	p, err := b.cs.CoreV1().Pods(b.opt.Namespace).Get(ctx, "kiln-"+sb.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := p.Spec.Containers[0].Resources
	if q, l := r.Requests[gpu], r.Limits[gpu]; q.Value() != 1 || l.Value() != 1 {
		t.Errorf("the Pod's %s: request %v, limit %v; want 1 and 1", gpu, q.String(), l.String())
	}
	if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
		t.Errorf("the Pod asking for 1 %s: node %q, phase %s; want it scheduled and running", gpu, p.Spec.NodeName, p.Status.Phase)
	}
	var out bytes.Buffer
	if _, err := agent.Exec(ctx, protocol.Exec{Argv: []string{"/bin/echo", "ok"}, TimeoutMs: 60_000, OutputBytes: 1 << 10}, &out, &out); err != nil || out.String() != "ok\n" {
		t.Errorf("the sandbox with a GPU: %q, %v", out.String(), err)
	}

	t0 := time.Now()
	_, err = b.CreateSandbox(ctx, backend.Spec{Limits: small, Resources: map[string]int64{gpu: 3}})
	if kiln.KindOf(err) != kiln.Unavailable || err == nil || !strings.Contains(err.Error(), "no node has 3 "+gpu) {
		t.Errorf("asking for 3 %s where the node has 2: %v; want unavailable, no node has 3", gpu, err)
	}
	if d := time.Since(t0); d > time.Minute {
		t.Errorf("asking for 3 %s took %v to fail; want at once, not the 2 min start timeout", gpu, d)
	}
	_, err = b.CreateSandbox(ctx, backend.Spec{Limits: small, Resources: map[string]int64{"nvidia.com/gpu": 1}})
	if kiln.KindOf(err) != kiln.Invalid || !strings.Contains(err.Error(), "allowed: "+gpu) {
		t.Errorf("asking for a resource not allowed: %v; want invalid, naming %s", err, gpu)
	}
	if ids, _ := b.List(ctx); !slices.Equal(ids, []string{sb.ID}) {
		t.Errorf("sandboxes after the refused creates: %v; want only [%s]", ids, sb.ID)
	}
}

// advertise makes every node advertise n of a fake extended resource, as
// a device plugin would, until the test ends; it waits until the node's
// allocatable shows it, which is what the scheduler reads.
func advertise(t *testing.T, b *Backend, name string, n int) {
	t.Helper()
	ctx := context.Background()
	nodes, err := b.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("the test cluster's nodes: %v", err)
	}
	path := "/status/capacity/" + strings.ReplaceAll(name, "/", "~1")
	for _, node := range nodes.Items {
		patch := `[{"op":"add","path":"` + path + `","value":"` + strconv.Itoa(n) + `"}]`
		if _, err := b.cs.CoreV1().Nodes().Patch(ctx, node.Name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatalf("advertising %s on node %s: %v", name, node.Name, err)
		}
		t.Cleanup(func() {
			for _, field := range []string{"capacity", "allocatable"} {
				p := `[{"op":"remove","path":"/status/` + field + `/` + strings.ReplaceAll(name, "/", "~1") + `"}]`
				if _, err := b.cs.CoreV1().Nodes().Patch(context.Background(), node.Name, types.JSONPatchType, []byte(p), metav1.PatchOptions{}, "status"); err != nil && !strings.Contains(err.Error(), "nonexistent") {
					t.Errorf("removing %s from node %s's %s: %v", name, node.Name, field, err)
				}
			}
		})
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, node := range nodes.Items {
		for {
			got, err := b.cs.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if q, ok := got.Status.Allocatable[corev1.ResourceName(name)]; ok && q.Value() == int64(n) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s's allocatable never showed %d %s: %v", node.Name, n, name, got.Status.Allocatable)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// With PVC workspaces, a session's files survive its Pod: the Pod is
// deleted (as an eviction or a node drain would), the service replaces
// the broken sandbox on the same workspace, and the new Pod has the
// files. Once the session has ended (its workspace directory removed),
// the PVC goes. The Pod itself still has no hostPath.
func TestWorkspacePVC(t *testing.T) {
	b := testBackend(t)
	ctx := context.Background()
	b.opt.Workspace, b.opt.StorageClass = WorkspacePVC, localVolume(t, b)
	small := kiln.Limits{CPUMillis: 200, MemoryBytes: 256 * kiln.MiB}
	hostDir := t.TempDir()
	claim := b.claimName(hostDir)
	pvcs := b.cs.CoreV1().PersistentVolumeClaims(b.opt.Namespace)
	t.Cleanup(func() { pvcs.Delete(context.Background(), claim, metav1.DeleteOptions{}) })

	sh := func(agent *agentclient.Client, script string) string {
		var out bytes.Buffer
		if _, err := agent.Exec(ctx, protocol.Exec{Argv: []string{"/bin/sh", "-c", script}, TimeoutMs: 60_000, OutputBytes: 1 << 10}, &out, &out); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	first, agent := backendtest.Sandbox(t, b, backend.Spec{Limits: small, HostDir: hostDir})
	if out := sh(agent, "echo kept > /workspace/note && cat /workspace/note"); out != "kept\n" {
		t.Fatalf("writing the workspace: %q", out)
	}
	p, err := b.cs.CoreV1().Pods(b.opt.Namespace).Get(ctx, "kiln-"+first.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range p.Spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("the sandbox Pod has a hostPath volume %q", v.Name)
		}
		if v.Name == "workspace" && (v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != claim) {
			t.Errorf("the workspace volume is %+v; want the PVC %s", v.VolumeSource, claim)
		}
	}

	// The Pod goes, not through kiln; kiln drops the broken sandbox.
	grace := int64(0)
	if err := b.cs.CoreV1().Pods(b.opt.Namespace).Delete(ctx, "kiln-"+first.ID, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if _, err := b.cs.CoreV1().Pods(b.opt.Namespace).Get(ctx, "kiln-"+first.ID, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the deleted Pod is still there after a minute")
		}
	}
	if err := b.DestroySandbox(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	second, agent := backendtest.Sandbox(t, b, backend.Spec{Limits: small, HostDir: hostDir})
	if out := sh(agent, "cat /workspace/note"); out != "kept\n" {
		t.Errorf("the workspace in the session's new Pod: %q; want the file written before its Pod was deleted", out)
	}
	// Another session, while the test's one PV is bound: no volume will
	// come, and the create says so at once.
	otherDir := t.TempDir()
	t.Cleanup(func() { pvcs.Delete(context.Background(), b.claimName(otherDir), metav1.DeleteOptions{}) })
	t0 := time.Now()
	if _, err := b.CreateSandbox(ctx, backend.Spec{Limits: small, HostDir: otherDir}); kiln.KindOf(err) != kiln.Unavailable || !strings.Contains(err.Error(), "no PersistentVolume is free") {
		t.Errorf("a second session with the one PV taken: %v; want unavailable, no PersistentVolume is free", err)
	}
	if d := time.Since(t0); d > time.Minute {
		t.Errorf("the second session took %v to fail; want at once, not the 2 min start timeout", d)
	}
	if err := b.DestroySandbox(ctx, second.ID); err != nil {
		t.Fatal(err)
	}

	// The session goes on (its directory is there): the PVC stays.
	if n, err := b.PruneWorkspaces(ctx); err != nil || n != 0 {
		t.Errorf("pruning with the session's workspace directory there: %d, %v; want 0", n, err)
	}
	if _, err := pvcs.Get(ctx, claim, metav1.GetOptions{}); err != nil {
		t.Fatalf("the PVC after its Pods were deleted: %v", err)
	}
	// The session ended: the service removed its directory.
	os.RemoveAll(hostDir)
	if n, err := b.PruneWorkspaces(ctx); err != nil || n != 1 {
		t.Errorf("pruning after the session ended: %d, %v; want 1", n, err)
	}
	if pvc, err := pvcs.Get(ctx, claim, metav1.GetOptions{}); err == nil && pvc.DeletionTimestamp == nil {
		t.Errorf("the PVC of an ended session is still there, not being deleted")
	}
}

// localVolume makes a StorageClass without a provisioner and one local
// PersistentVolume of it on a directory of the node (this machine), for
// the test only, and returns the class; both go when the test ends. (The
// PV is the node's directory; the sandbox Pod sees only its claim.)
func localVolume(t *testing.T, b *Backend) string {
	t.Helper()
	ctx := context.Background()
	nodes, err := b.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 {
		t.Fatalf("want the single-node test cluster: %v", err)
	}
	name := "kiln-test-" + newID()
	dir := filepath.Join(env("KILN_K8S_STATE", "/var/lib/kspike"), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	retain := corev1.PersistentVolumeReclaimRetain
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wait, ReclaimPolicy: &retain}
	if _, err := b.cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.cs.StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	host := nodes.Items[0].Labels["kubernetes.io/hostname"]
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: retain,
			StorageClassName:              name,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{host}}},
			}}}},
		},
	}
	if _, err := b.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// after the claim's deletion (cleanups run last first): wait for
		// the PV to be released, then delete it
		pvs := b.cs.CoreV1().PersistentVolumes()
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if got, err := pvs.Get(context.Background(), name, metav1.GetOptions{}); err != nil || got.Status.Phase != corev1.VolumeBound {
				break
			}
		}
		if err := pvs.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the test's PV %s: %v", name, err)
		}
	})
	// The scheduler must know the volume before a claim looks for one:
	// kiln fails a claim that finds no free volume at once. Wait for the
	// PV controller to call it Available, and a moment more for the
	// scheduler's own view (a failed run found none 70 ms in).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if got, err := b.cs.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{}); err == nil && got.Status.Phase == corev1.VolumeAvailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the test's PV %s never became Available", name)
		}
	}
	time.Sleep(time.Second)
	return name
}

// poolBackend is a backend on the test cluster with a warm pool of size
// Pods of small limits, closed when the test ends.
func poolBackend(t testing.TB, size int, lim kiln.Limits) *Backend {
	t.Helper()
	testBackend(t) // the image
	b, err := New(context.Background(), env("KUBECONFIG", "/var/lib/kspike/kubeconfig"), Options{Image: testImage, PullPolicy: corev1.PullNever, WarmPods: size, WarmLimits: lim})
	if err != nil {
		t.Fatal(err)
	}
	b.SetOwner(t.Name() + " pool")
	t.Cleanup(func() { b.Close() })
	return b
}

// waitWarm waits until n warm sandboxes are ready to be claimed, and
// returns the ids of the pool's Pods.
func waitWarm(t testing.TB, b *Backend, n int32) map[string]bool {
	t.Helper()
	b.fillPool()
	p := b.thePool()
	for deadline := time.Now().Add(2 * time.Minute); p.offered.Load() < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the warm pool has %d ready after 2 min; want %d", p.offered.Load(), n)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.ids)
}

// A warm pool keeps a Pod ready: a sandbox of the pool's limits takes it
// (and works), the pool makes the next one, other limits start a Pod of
// their own, List shows no warm Pod, and Close deletes the pool's Pods.
func TestWarmPool(t *testing.T) {
	small := kiln.Limits{CPUMillis: 100, MemoryBytes: 128 * kiln.MiB}
	b := poolBackend(t, 1, small)
	ctx := context.Background()
	warm := waitWarm(t, b, 1)
	if ids, err := b.List(ctx); err != nil || len(ids) != 0 {
		t.Errorf("List with only a warm Pod: %v, %v; want none (it is no sandbox yet)", ids, err)
	}
	sb, agent := backendtest.Sandbox(t, b, backend.Spec{Limits: small})
	if !warm[sb.ID] {
		t.Errorf("the sandbox %s is not the warm Pod (%v)", sb.ID, warm)
	}
	var out bytes.Buffer
	if _, err := agent.Exec(ctx, protocol.Exec{Argv: []string{"/bin/echo", "warm"}, TimeoutMs: 60_000, OutputBytes: 1 << 10}, &out, &out); err != nil || out.String() != "warm\n" {
		t.Errorf("the claimed sandbox: %q, %v", out.String(), err)
	}
	again := waitWarm(t, b, 1)
	if again[sb.ID] || len(again) != 1 {
		t.Errorf("the pool after a claim: %v; want one new Pod, not %s", again, sb.ID)
	}
	other, _ := backendtest.Sandbox(t, b, backend.Spec{Limits: kiln.Limits{CPUMillis: 150, MemoryBytes: 128 * kiln.MiB}})
	if again[other.ID] {
		t.Errorf("a sandbox of other limits took the warm Pod %s", other.ID)
	}
	if ids, _ := b.List(ctx); !slices.Equal(ids, sortedIDs(sb.ID, other.ID)) {
		t.Errorf("List: %v; want the two sandboxes only", ids)
	}
	b.DestroySandbox(ctx, sb.ID)
	b.DestroySandbox(ctx, other.ID)
	b.Close()
	pods, err := b.cs.CoreV1().Pods(b.opt.Namespace).List(ctx, metav1.ListOptions{LabelSelector: b.selector()})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			t.Errorf("Pod %s is left after Close", p.Name)
		}
	}
}

func sortedIDs(ids ...string) []string {
	slices.Sort(ids)
	return ids
}

// BenchmarkCreateSandbox is CreateSandbox's latency, Pod create → agent
// ready and isolated, cold and as a claim on a ready warm Pod; it reports
// the median (ms/create-median) beside go test's mean. Run with a few
// iterations: go test -tags kubernetes -run X -bench CreateSandbox
// -benchtime 9x ./internal/backend/kubernetes/
func BenchmarkCreateSandbox(b *testing.B) {
	small := kiln.Limits{CPUMillis: 100, MemoryBytes: 128 * kiln.MiB}
	for _, warm := range []bool{false, true} {
		name := "cold"
		if warm {
			name = "warm"
		}
		b.Run(name, func(b *testing.B) {
			k := poolBackend(b, 1, small)
			if !warm {
				k.opt.WarmPods = 0 // poolBackend's pool never starts
			}
			ctx := context.Background()
			var took []time.Duration
			for b.Loop() {
				if warm {
					b.StopTimer()
					waitWarm(b, k, 1)
					b.StartTimer()
				}
				t0 := time.Now()
				sb, err := k.CreateSandbox(ctx, backend.Spec{Limits: small})
				if err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(t0))
				b.StopTimer()
				k.DestroySandbox(ctx, sb.ID)
				b.StartTimer()
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms/create-median")
		})
	}
}
