//go:build kubernetes && linux

// kiln serve --backend kubernetes on the test cluster (scripts/k8s/up):
// go test -tags kubernetes -run Kubernetes ./cmd/kiln/, as root.
package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// A one-shot run and a session work through kiln serve --backend
// kubernetes, each in a Pod of the runtimes image as the sandbox user;
// after a SIGKILL, the next kiln serve on the same data directory reaps
// the Pods the first one left.
func TestServeKubernetes(t *testing.T) {
	kubeconfig, _, cs := testCluster(t)
	ctx := context.Background()
	ns := testNamespace(t, cs, "kiln-serve-test")
	pods := func() int {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=kiln"})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil {
				n++
			}
		}
		return n
	}
	dir := t.TempDir()
	// The workspace root's parents must be searchable by the sandbox users.
	os.Chmod(filepath.Dir(dir), 0o711)
	os.Chmod(dir, 0o711)
	bin := buildKubeKiln(t, dir)
	data := filepath.Join(dir, "data")
	os.Mkdir(data, 0o711)
	// Runs after the servers are killed and before the directory goes: a
	// killed server leaves its disk workspaces mounted.
	t.Cleanup(func() {
		b, _ := os.ReadFile("/proc/self/mountinfo")
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], data+"/") {
				unix.Unmount(f[4], unix.MNT_DETACH)
			}
		}
	})
	serve := func() (*exec.Cmd, string) {
		return kubeServe(t, bin, filepath.Join(dir, "serve.log"), "--kubeconfig", kubeconfig, "--namespace", ns,
			"--data", data, "--admin-key-file", filepath.Join(dir, "admin.key"))
	}
	first, addr := serve()
	key, _ := os.ReadFile(filepath.Join(dir, "admin.key"))
	post := func(path, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+addr+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(key)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		json.NewDecoder(resp.Body).Decode(&v)
		if resp.StatusCode >= 300 {
			t.Fatalf("POST %s: %s %v", path, resp.Status, v)
		}
		return v
	}
	res := post("/v1/run", `{"language": "python", "code": "import os; print(os.getuid(), os.path.exists('/var/run/secrets/kubernetes.io'))"}`)
	if got, _ := res["result"].(map[string]any)["stdout"].(string); got != "1199000000 False\n" {
		t.Errorf("a run's output %q; want the sandbox user's uid and no service-account token (result %v)", got, res)
	}
	post("/v1/sessions", `{}`)
	if n := pods(); n != 1 {
		t.Fatalf("%d kiln Pods with one session; want 1", n)
	}
	first.Process.Kill()
	time.Sleep(time.Second) // Wait is its goroutine's
	if n := pods(); n != 1 {
		t.Fatalf("%d kiln Pods after kiln serve was killed; want its session's 1 left", n)
	}
	serve()
	if n := pods(); n != 0 {
		t.Errorf("%d kiln Pods after the next kiln serve started; want those the killed one left reaped", n)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "serve.log")); !regexp.MustCompile(`reaped the sandboxes a previous kiln serve left.*count=1`).Match(b) {
		t.Errorf("the second kiln serve does not log what it reaped:\n%s", b)
	}
}

// buildKubeKiln builds kiln with the Kubernetes backend into dir.
func buildKubeKiln(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "kiln")
	if out, err := exec.Command("go", "build", "-tags", "kubernetes", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags kubernetes: %v\n%s", err, out)
	}
	return bin
}

// kubeServe starts kiln serve --backend kubernetes (bin) on a free
// port with args, its output in logPath, killed when the test ends, and
// returns once it listens.
func kubeServe(t *testing.T, bin, logPath string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, append([]string{"serve", "--backend", "kubernetes",
		"--k8s-containerd", envOr("KILN_K8S_CONTAINERD", "/run/kspike/containerd.sock"),
		"--listen", addr, "--pool", "0", "--run-pool", "0"}, args...)...)
	log, _ := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return cmd, addr
		}
		select {
		case <-exited:
			deadline = time.Time{}
		default:
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("kiln serve --backend kubernetes did not start:\n%s", b)
		}
	}
}

// testCluster is the test cluster's kubeconfig, its config and a client, or the
// test fails: scripts/k8s/ci runs these tests only with a cluster up.
func testCluster(t *testing.T) (string, *rest.Config, *kubernetes.Clientset) {
	t.Helper()
	needRoot(t)
	kubeconfig := envOr("KUBECONFIG", "/var/lib/kspike/kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("no test cluster (scripts/k8s/up brings it up): %v", err)
	}
	return kubeconfig, cfg, kubernetes.NewForConfigOrDie(cfg)
}

// testNamespace makes namespace ns for the test and deletes it, with
// everything in it, when the test ends.
func testNamespace(t *testing.T, cs *kubernetes.Clientset, ns string) string {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("no test cluster (scripts/k8s/up brings it up): %v", err)
	}
	t.Cleanup(func() { cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return ns
}
