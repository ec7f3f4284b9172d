//go:build kubernetes && linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
)

// Through kiln serve --backend kubernetes --k8s-workspace pvc: a session
// asking for a GPU the administrator allows (the test cluster's fake
// example.com/fakegpu) gets a Pod with it, and one asking for another is
// a 400 naming it; a file written in the session survives a SIGKILL of
// kiln serve and the next kiln serve's reaping of the Pod (the session
// goes on in a new Pod on the same PVC, with its GPU again); the
// session's deletion takes the PVC (here on the next start's Reap).
func TestServeKubernetesPVC(t *testing.T) {
	kubeconfig, _, cs := testCluster(t)
	ctx := context.Background()
	ns := testNamespace(t, cs, "kiln-serve-pvc-test")
	class := testLocalVolume(t, cs)
	s := newK8sServer(t, kubeconfig, ns, "--k8s-workspace", "pvc", "--k8s-storage-class", class, "--k8s-extended-resource", "example.com/fakegpu=1")
	serve, call := s.start, s.call
	first := serve()
	stdout := func(session, code string) string {
		t.Helper()
		st, v := call("POST", "/v1/sessions/"+session+"/executions", fmt.Sprintf(`{"code": %q}`, code))
		if st >= 300 {
			t.Fatalf("a cell: %d %v", st, v)
		}
		s, _ := v["result"].(map[string]any)["stdout"].(string)
		return s
	}

	st, v := call("POST", "/v1/sessions", `{"resources": {"nvidia.com/gpu": 1}}`)
	if detail, _ := v["detail"].(string); st != 400 || !strings.Contains(detail, "allowed: example.com/fakegpu (at most 1)") {
		t.Errorf("a session asking for nvidia.com/gpu: %d %v; want 400 naming example.com/fakegpu", st, v)
	}
	st, v = call("POST", "/v1/sessions", `{"resources": {"example.com/fakegpu": 1}}`)
	if st != 201 {
		t.Fatalf("a session asking for example.com/fakegpu: %d %v", st, v)
	}
	id, _ := v["id"].(string)
	if r, _ := v["resources"].(map[string]any); r["example.com/fakegpu"] != 1.0 {
		t.Errorf("the session as created: resources %v; want example.com/fakegpu 1", v["resources"])
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=kiln"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the session's Pods: %v, %v; want 1", pods, err)
	}
	p := pods.Items[0]
	if q := p.Spec.Containers[0].Resources.Limits[corev1.ResourceName("example.com/fakegpu")]; q.Value() != 1 {
		t.Errorf("the session's Pod's example.com/fakegpu limit: %v; want 1", q.String())
	}
	claim := ""
	for _, vol := range p.Spec.Volumes {
		if vol.Name == "workspace" && vol.PersistentVolumeClaim != nil {
			claim = vol.PersistentVolumeClaim.ClaimName
		}
	}
	if claim == "" {
		t.Fatalf("the session's Pod has no PVC workspace: %+v", p.Spec.Volumes)
	}
	if got := stdout(id, "open('kept.txt', 'w').write('kept'); print(open('kept.txt').read())"); got != "kept\n" {
		t.Fatalf("writing a file in the session: %q", got)
	}

	first.Process.Kill()
	time.Sleep(time.Second)
	serve() // reaps the killed one's Pod; the PVC stays
	if got := stdout(id, "print(open('kept.txt').read())"); got != "kept\n" {
		t.Errorf("the file after kiln serve was killed and restarted: %q; want kept (the session's new Pod on its PVC)", got)
	}
	if now, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=kiln"}); err != nil || len(now.Items) != 1 || now.Items[0].Name == p.Name {
		t.Errorf("the session's Pods after the restart: %v, %v; want one new Pod, not %s", now, err, p.Name)
	} else if q := now.Items[0].Spec.Containers[0].Resources.Limits[corev1.ResourceName("example.com/fakegpu")]; q.Value() != 1 {
		t.Errorf("the session's new Pod after the restart has example.com/fakegpu %v; want 1 again (stored with the session)", q.String())
	}
	if st, v := call("DELETE", "/v1/sessions/"+id, ""); st >= 300 {
		t.Fatalf("deleting the session: %d %v", st, v)
	}
	serve() // its Reap prunes the ended session's PVC
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if err == nil && pvc.DeletionTimestamp == nil {
		t.Errorf("the PVC %s of a deleted session is still there after kiln serve's next start", claim)
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// k8sServer runs kiln serve --backend kubernetes, built once, on one
// data directory, with small default limits and no pools of its own.
type k8sServer struct {
	t                    *testing.T
	bin, dir, data, addr string
	kubeconfig, ns       string
	args                 []string
}

func newK8sServer(t *testing.T, kubeconfig, ns string, args ...string) *k8sServer {
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o711)
	os.Chmod(dir, 0o711)
	s := &k8sServer{t: t, bin: filepath.Join(dir, "kiln"), dir: dir, data: filepath.Join(dir, "data"), kubeconfig: kubeconfig, ns: ns, args: args}
	if out, err := exec.Command("go", "build", "-tags", "kubernetes", "-o", s.bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags kubernetes: %v\n%s", err, out)
	}
	os.Mkdir(s.data, 0o711)
	t.Cleanup(func() {
		b, _ := os.ReadFile("/proc/self/mountinfo")
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], s.data+"/") {
				unix.Unmount(f[4], unix.MNT_DETACH)
			}
		}
	})
	return s
}

// start starts kiln serve and waits until it listens.
func (s *k8sServer) start() *exec.Cmd {
	cmd, addr := kubeServe(s.t, s.bin, filepath.Join(s.dir, "serve.log"), append([]string{"--kubeconfig", s.kubeconfig, "--namespace", s.ns,
		"--default-cpus", "0.2", "--default-memory", "256M",
		"--data", s.data, "--admin-key-file", filepath.Join(s.dir, "admin.key")}, s.args...)...)
	s.addr = addr
	return cmd
}

// call makes a request as the admin and returns the status and the JSON.
func (s *k8sServer) call(method, path, body string) (int, map[string]any) {
	s.t.Helper()
	key, _ := os.ReadFile(filepath.Join(s.dir, "admin.key"))
	req, _ := http.NewRequest(method, "http://"+s.addr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(key)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v map[string]any
	json.Unmarshal(b, &v)
	return resp.StatusCode, v
}

// Through kiln serve --k8s-warm-pods 1: a warm Pod is made at start, a
// session (asking for no limits: the server's defaults) takes it and
// works, the pool makes the next one, and a stopped kiln serve deletes
// the warm Pod (its session's goes as the service closes it).
func TestServeKubernetesWarmPods(t *testing.T) {
	kubeconfig, cfg, cs := testCluster(t)
	ctx := context.Background()
	ns := testNamespace(t, cs, "kiln-serve-warm-test")
	// running lists the kiln Pods that run and are not being deleted
	running := func() []string {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=kiln"})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				names = append(names, p.Name)
			}
		}
		return names
	}
	waitFor := func(what string, ok func([]string) bool) []string {
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
			if names := running(); ok(names) {
				return names
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: running kiln Pods %v after 2 min", what, running())
			}
		}
	}
	s := newK8sServer(t, kubeconfig, ns, "--k8s-warm-pods", "1")
	cmd := s.start()
	warm := waitFor("the warm Pod", func(n []string) bool { return len(n) == 1 })[0]
	time.Sleep(2 * time.Second) // past its agent's start and isolation check
	// a mark in the warm Pod's /tmp, for the session to find
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(warm).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "sandbox", Command: []string{"/bin/sh", "-c", "echo warm > /tmp/mark"}, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &out}); err != nil {
		t.Fatalf("marking the warm Pod: %v %s", err, out.String())
	}
	st, v := s.call("POST", "/v1/sessions", `{}`)
	if st != 201 {
		t.Fatalf("a session: %d %v", st, v)
	}
	id, _ := v["id"].(string)
	st, v = s.call("POST", "/v1/sessions/"+id+"/executions", `{"code": "print(open('/tmp/mark').read().strip(), 6*7)"}`)
	if out, _ := v["result"].(map[string]any)["stdout"].(string); st != 200 || out != "warm 42\n" {
		t.Errorf("a cell in the session: %d %v; want it on the warm Pod (its mark) and working", st, v)
	}
	names := waitFor("the pool's next Pod", func(n []string) bool { return len(n) == 2 })
	if !slices.Contains(names, warm) {
		t.Errorf("running Pods %v: the warm Pod %s is gone; want the session on it and a new warm one", names, warm)
	}
	cmd.Process.Signal(unix.SIGTERM)
	waitFor("after kiln serve stopped", func(n []string) bool { return len(n) == 0 })
}

// testLocalVolume makes a no-provisioner StorageClass and one local PV on
// a directory of this machine (the single node), for the test only.
func testLocalVolume(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ctx := context.Background()
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 {
		t.Fatalf("want the single-node test cluster: %v", err)
	}
	name := fmt.Sprintf("kiln-serve-test-%d", time.Now().UnixNano())
	dir := filepath.Join(envOr("KILN_K8S_STATE", "/var/lib/kspike"), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	wait, retain := storagev1.VolumeBindingWaitForFirstConsumer, corev1.PersistentVolumeReclaimRetain
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: &wait, ReclaimPolicy: &retain}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: retain,
			StorageClassName:              name,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{nodes.Items[0].Labels["kubernetes.io/hostname"]}}},
			}}}},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pvs := cs.CoreV1().PersistentVolumes()
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if got, err := pvs.Get(context.Background(), name, metav1.GetOptions{}); err != nil || got.Status.Phase != corev1.VolumeBound {
				break
			}
		}
		if err := pvs.Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the test's PV %s: %v", name, err)
		}
	})
	return name
}
