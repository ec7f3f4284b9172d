//go:build kubernetes && linux

// Package k8sdeploy deploys kiln with deploy/kubernetes into the test
// cluster (scripts/k8s/up) and uses a session through the deployed kiln:
// go test -tags kubernetes ./test/k8sdeploy/, as root. It fails, never
// skips, without a cluster: CI runs it once it has brought one up.
package k8sdeploy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// kubectlBin is the cluster's own kubectl (scripts/k8s/up builds it),
// else the one on PATH.
func kubectlBin() string {
	bin := filepath.Join(envOr("KILN_K8S_CACHE", "/var/cache/kiln-k8s"), "bin", "kubectl")
	if _, err := os.Stat(bin); err != nil {
		return "kubectl"
	}
	return bin
}

// kubectl runs kubectl with stdin and returns its output.
func kubectl(t *testing.T, kubeconfig string, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(kubectlBin(), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return string(out)
}

// The manifests deploy two non-root kiln replicas on one PostgreSQL into
// namespaces of the test's own; through the Service, a session runs a
// Python cell in a sandbox Pod in the sandbox namespace; the replicas'
// ServiceAccount may make Pods there and nowhere else.
func TestDeployKustomize(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root: it imports images into the node's containerd (scripts/k8s/ci runs it as root)")
	}
	t0 := time.Now()
	kubeconfig := envOr("KUBECONFIG", "/var/lib/kspike/kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("no test cluster (scripts/k8s/up brings it up): %v", err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	b := make([]byte, 4)
	rand.Read(b)
	ns := "kiln-deploy-test-" + hex.EncodeToString(b) // the manifests' kiln-system
	sb := ns + "-sb"                                  // their kiln-sandboxes
	for _, n := range []string{ns, sb} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("no test cluster (scripts/k8s/up brings it up): %v", err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				dumpNamespace(t, cs, n)
			}
			cs.CoreV1().Namespaces().Delete(context.Background(), n, metav1.DeleteOptions{})
		})
	}

	// The images, as the README has them built.
	images := exec.Command("../../deploy/kubernetes/images", envOr("KILN_K8S_CONTAINERD", "/run/kspike/containerd.sock"))
	if out, err := images.CombinedOutput(); err != nil {
		t.Fatalf("deploy/kubernetes/images: %v\n%s", err, out)
	} else {
		t.Logf("deploy/kubernetes/images (%s):\n%s", time.Since(t0).Round(time.Second), out)
	}

	dsn := startPostgres(t, cs, ns)
	// README.md's two commands, in the test's namespaces.
	kubectl(t, kubeconfig, "", "-n", ns, "create", "secret", "generic", "kiln-db", "--from-literal=dsn="+dsn)

	// The kustomization as it is, in the test's namespaces.
	manifests := kubectl(t, kubeconfig, "", "kustomize", "../../deploy/kubernetes")
	for _, want := range []string{"kind: Deployment", "kind: PodDisruptionBudget", "kind: Role\n", "kind: RoleBinding", "kind: Service\n", "kind: ServiceAccount", "prometheus.io/scrape"} {
		if !strings.Contains(manifests, want) {
			t.Errorf("the kustomization has no %q", want)
		}
	}
	manifests = strings.ReplaceAll(manifests, "kiln-sandboxes", sb)
	manifests = strings.ReplaceAll(manifests, "kiln-system", ns)
	kubectl(t, kubeconfig, manifests, "apply", "-f", "-")
	t1 := time.Now()
	if out := kubectl(t, kubeconfig, "", "-n", ns, "rollout", "status", "deployment/kiln", "--timeout=3m"); !strings.Contains(out, "successfully rolled out") {
		t.Fatalf("the Deployment did not roll out: %s", out)
	}
	dep, err := cs.AppsV1().Deployments(ns).Get(ctx, "kiln", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dep.Status.ReadyReplicas != 2 {
		t.Fatalf("%d kiln replicas ready; want 2", dep.Status.ReadyReplicas)
	}
	t.Logf("2 replicas ready %s after apply", time.Since(t1).Round(time.Second))
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=server"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		checkNonRoot(t, p)
		// The metrics listener the scrape annotations name.
		get(t, fmt.Sprintf("http://%s:%s%s", p.Status.PodIP, p.Annotations["prometheus.io/port"], p.Annotations["prometheus.io/path"]), "", "kiln_")
	}
	// kiln serve prints the first admin key on one replica's stdout: read
	// as README.md says.
	logs := kubectl(t, kubeconfig, "", "-n", ns, "logs", "-l", "app.kubernetes.io/component=server", "--tail=-1")
	if n := strings.Count(logs, "created the admin API key"); n != 1 {
		t.Errorf("%d replicas made an admin key on one database; want 1", n)
	}
	key := regexp.MustCompile(`kiln_[A-Z0-9]*`).FindString(logs)
	if key == "" {
		t.Fatal("no replica printed the admin key")
	}

	// The RBAC: Pods and exec streams in the sandbox namespace, nothing in its own.
	sa := "system:serviceaccount:" + ns + ":kiln"
	for _, c := range []struct{ verb, resource, ns, want string }{
		{"create", "pods", sb, "yes"}, {"create", "pods/exec", sb, "yes"}, {"delete", "pods", sb, "yes"}, {"patch", "pods", sb, "yes"},
		{"create", "networkpolicies.networking.k8s.io", sb, "yes"}, {"get", "secrets", sb, "no"},
		{"create", "pods", ns, "no"}, {"list", "secrets", ns, "no"}, {"create", "pods", "default", "no"},
	} {
		got := strings.TrimSpace(canI(t, kubeconfig, sa, c.verb, c.resource, c.ns))
		if got != c.want {
			t.Errorf("can kiln's ServiceAccount %s %s in %s? %s; want %s", c.verb, c.resource, c.ns, got, c.want)
		}
	}

	// A session through the Service. The test cluster blackholes the
	// Service range on the host (scripts/k8s/up), so the client is a Pod,
	// which reaches the ClusterIP through kube-proxy as any in-cluster
	// client would (no DNS either: the address, not kiln.<ns>.svc).
	svc, err := cs.CoreV1().Services(ns).Get(ctx, "kiln", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The later cells go to each replica's Pod directly: one of them
	// holds the session, the other takes it over with its kernel.
	apis := []string{fmt.Sprintf("http://%s:%d/v1", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)}
	servers, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=server"})
	if err != nil || len(servers.Items) != 2 {
		t.Fatalf("kiln's server Pods: %v %v; want 2", servers, err)
	}
	for _, p := range servers.Items {
		apis = append(apis, fmt.Sprintf("http://%s:8420/v1", p.Status.PodIP))
	}
	res, most := runClient(t, cs, ns, sb, strings.Join(apis, " "), key)
	want := []string{"42 1199000000 False kiln\n", "43\n", "44\n"}
	if !slices.Equal(res.Stdout, want) {
		t.Errorf("the cells printed %q; want %q: 42, the sandbox user's uid, no service-account token, the sandbox Pod's hostname; then 43 and 44 on each replica in turn (the session keeps its state)", res.Stdout, want)
	}
	if most != 1 {
		t.Errorf("%d sandbox Pods at most in %s during the session; want 1", most, sb)
	}
	for deadline := time.Now().Add(time.Minute); sandboxPods(t, cs, sb) != 0; time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("the deleted session's sandbox Pod is still there after a minute")
			break
		}
	}
	// From this host, as README.md's walkthrough goes: a port-forward to the Service.
	local := portForward(t, kubeconfig, ns)
	get(t, "http://"+local+"/v1/health/ready", "", `"ready"`)
	get(t, "http://"+local+"/v1/languages", key, `"python"`)
	t.Logf("whole test %s", time.Since(t0).Round(time.Second))
}

// clientScript is the client Pod's: a session, a cell on each of the
// API addresses in $API (space-separated) in turn, the session deleted;
// one JSON line of what the cells printed, or the HTTP error.
const clientScript = `
import json, os, sys, urllib.request, urllib.error
apis, key = os.environ["API"].split(), os.environ["KEY"]
def call(method, path, body=None, api=apis[0]):
    req = urllib.request.Request(api + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=180) as r:
            return json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        sys.exit("%s %s: %s %r" % (method, path, e.code, e.read()[:500]))
s = call("POST", "/sessions", {})
cells = ["import os, socket\nx = 6 * 7\nprint(x, os.getuid(), os.path.exists('/var/run/secrets/kubernetes.io'), socket.gethostname())", "print(x + 1)", "x += 2\nprint(x)"]
out = [call("POST", "/sessions/%s/executions" % s["id"], {"code": c}, api)["result"]["stdout"] for c, api in zip(cells, apis)]
call("DELETE", "/sessions/" + s["id"])
print(json.dumps({"session": s["id"], "stdout": out}))
`

type clientResult struct {
	Session string
	Stdout  []string
}

// runClient runs clientScript in a Pod of the runtimes image (it has
// Python) against api, and returns what it printed and the most sandbox
// Pods seen in sb while it ran.
func runClient(t *testing.T, cs kubernetes.Interface, ns, sb, api, key string) (clientResult, int) {
	t.Helper()
	ctx := context.Background()
	uid := int64(1199000000)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: new(false),
			SecurityContext:              &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &uid},
			Containers: []corev1.Container{{
				Name: "client", Image: "kiln.local/sandbox:deploy", ImagePullPolicy: corev1.PullNever,
				Command: []string{"/usr/bin/python3", "-c", clientScript},
				Env:     []corev1.EnvVar{{Name: "API", Value: api}, {Name: "KEY", Value: key}},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	most := 0
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		most = max(most, sandboxPods(t, cs, sb))
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "client", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			logs, _ := cs.CoreV1().Pods(ns).GetLogs("client", &corev1.PodLogOptions{}).Do(ctx).Raw()
			var res clientResult
			if p.Status.Phase == corev1.PodFailed || json.Unmarshal(bytes.TrimSpace(logs), &res) != nil {
				t.Fatalf("the client Pod (%s) said:\n%s", p.Status.Phase, logs)
			}
			return res, most
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client Pod has not ended after 5 minutes: %+v", p.Status)
		}
	}
}

// portForward runs kubectl port-forward svc/kiln to a free local port
// until the test ends, and returns the local address.
func portForward(t *testing.T, kubeconfig, ns string) string {
	t.Helper()
	cmd := exec.Command(kubectlBin(), "--kubeconfig", kubeconfig, "-n", ns, "port-forward", "--address", "127.0.0.1", "svc/kiln", ":8420")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := regexp.MustCompile(`Forwarding from (127\.0\.0\.1:\d+)`).FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a := <-addr:
		return a
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("kubectl port-forward svc/kiln: no forwarding after a minute: %s", stderr.Bytes())
		return ""
	}
}

func canI(t *testing.T, kubeconfig, sa, verb, resource, ns string) string {
	// exit status 1 is "no"
	out, _ := exec.Command(kubectlBin(), "--kubeconfig", kubeconfig, "auth", "can-i", verb, resource, "-n", ns, "--as", sa).Output()
	return string(out)
}

// checkNonRoot checks that the kiln replica runs as uid 65532 with a
// read-only root filesystem: from its Pod's spec, and from the kiln
// process on this node (the test cluster is this machine).
func checkNonRoot(t *testing.T, p corev1.Pod) {
	t.Helper()
	c := p.Spec.Containers[0]
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("pod %s: the kiln container's root filesystem is not read-only", p.Name)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	found := false
	for _, f := range procs {
		cmdline, _ := os.ReadFile(f)
		if !bytes.Contains(cmdline, []byte("--data=/data/"+p.Name+"\x00")) {
			continue
		}
		found = true
		if bytes.Contains(cmdline, []byte("postgres://")) {
			t.Errorf("pod %s: the PostgreSQL DSN is on kiln serve's command line, which any user of the node can read", p.Name)
		}
		status, _ := os.ReadFile(filepath.Join(filepath.Dir(f), "status"))
		if !regexp.MustCompile(`(?m)^Uid:\s+65532\s+65532\s+65532\s+65532$`).Match(status) {
			t.Errorf("pod %s: kiln serve does not run as uid 65532:\n%s", p.Name, status)
		}
	}
	if !found {
		t.Errorf("pod %s: no kiln serve process with --data=/data/%s on this node", p.Name, p.Name)
	}
}

func sandboxPods(t *testing.T, cs kubernetes.Interface, ns string) int {
	t.Helper()
	l, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=kiln"})
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

// startPostgres runs a PostgreSQL Pod in ns, of the runtimes image (the
// host's /usr has PostgreSQL 15; the cluster pulls nothing), with a
// password, behind a Service, and returns the DSN the kiln Pods use.
func startPostgres(t *testing.T, cs kubernetes.Interface, ns string) string {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 12)
	rand.Read(b)
	pw := hex.EncodeToString(b)
	uid := int64(1199000000) // the runtimes image's user: initdb refuses root
	script := `set -e
bin=/usr/lib/postgresql/15/bin
echo "$PGPASSWORD" > /tmp/pw
$bin/initdb -D /pg/data -U kiln --pwfile=/tmp/pw --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --no-sync >/dev/null
echo "host all all 0.0.0.0/0 scram-sha-256" >> /pg/data/pg_hba.conf
exec $bin/postgres -D /pg/data -k /tmp -c listen_addresses='*' -c fsync=off -c max_connections=100`
	labels := map[string]string{"app.kubernetes.io/name": "kiln-test-postgres"}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "postgres", Labels: labels},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: new(false),
			SecurityContext:              &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid},
			Containers: []corev1.Container{{
				Name: "postgres", Image: "kiln.local/sandbox:deploy", ImagePullPolicy: corev1.PullNever,
				Command: []string{"/bin/bash", "-c", script},
				Env:     []corev1.EnvVar{{Name: "PGPASSWORD", Value: pw}, {Name: "LANG", Value: "C.UTF-8"}},
				Ports:   []corev1.ContainerPort{{ContainerPort: 5432}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
					Command: []string{"/usr/lib/postgresql/15/bin/pg_isready", "-h", "127.0.0.1", "-U", "kiln"}}}, PeriodSeconds: 1},
				VolumeMounts: []corev1.VolumeMount{{Name: "pg", MountPath: "/pg"}, {Name: "tmp", MountPath: "/tmp"}},
			}},
			Volumes: []corev1.Volume{{Name: "pg", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "postgres"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 5432, TargetPort: intstr.FromInt32(5432)}}},
	}
	s, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "postgres", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].Ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the PostgreSQL Pod is not ready after 2 minutes: %+v", p.Status)
		}
	}
	return fmt.Sprintf("postgres://kiln:%s@%s:5432/postgres?sslmode=disable", pw, s.Spec.ClusterIP)
}

func get(t *testing.T, url, key, want string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	body := do(t, req)
	if !strings.Contains(string(body), want) {
		t.Errorf("GET %s: %.300s; want %q in it", url, body, want)
	}
}

func do(t *testing.T, req *http.Request) []byte {
	t.Helper()
	c := &http.Client{Timeout: 3 * time.Minute}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %s %.500s", req.Method, req.URL, resp.Status, b)
	}
	return b
}

// dumpNamespace logs what a failed test left, for its reader.
func dumpNamespace(t *testing.T, cs kubernetes.Interface, ns string) {
	ctx := context.Background()
	pods, _ := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	for _, p := range pods.Items {
		t.Logf("pod %s/%s: %s %+v", ns, p.Name, p.Status.Phase, p.Status.ContainerStatuses)
		logs, _ := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: new(int64(30))}).Do(ctx).Raw()
		t.Logf("logs of %s:\n%s", p.Name, logs)
	}
	ev, _ := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	for _, e := range ev.Items {
		t.Logf("event %s %s: %s", e.InvolvedObject.Name, e.Reason, e.Message)
	}
}
