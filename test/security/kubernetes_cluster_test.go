//go:build kubernetes && linux

package security

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/backend/docker"
	"github.com/kiln-dev/kiln/internal/backend/kubernetes"
	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/engine"
)

// The owner label internal/backend/kubernetes puts on what it makes.
const kubeLabelOwner = "dev.kiln.owner"

func init() { newKubeSuiteFunc = newKubernetesSuite }

// kubeSuite is the suite on the test cluster: the backend in a namespace
// of the suite's own (made at the start, deleted at the end), under an
// owner of its own, and a client of its own that looks at the Pods as an
// operator's kubectl would. The node is this machine, so the Pods'
// processes, cgroups and mounts are the host's too, seen from outside.
type kubeSuite struct {
	b          *kubernetes.Backend
	cs         k8s.Interface
	kubeconfig string
	ns         string
	ownerName  string // given to SetOwner
	owner      string // its label value (the backend labels a hash of it)
	image      string
	built      bool          // the suite imported the image, so it removes it at the end
	start      time.Duration // startCost
	containerd string
	stopWatch  context.CancelFunc

	mu   sync.Mutex
	pods map[string]podSeen // Pod uid -> the Pod, every one seen in the namespace
}

type podSeen struct{ name, owner string }

func env2(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// ownerLabel is the label value the backend gives an owner (SetOwner).
func ownerLabel(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(sum[:])[:40]
}

// newKubernetesSuite builds the runtimes image from this test binary (the
// agent in the Pod: the kubernetes package's init runs it), imports it
// into the node's containerd, and makes the suite's namespace.
func newKubernetesSuite() (kubeBackend, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	k := &kubeSuite{
		kubeconfig: env2("KUBECONFIG", "/var/lib/kspike/kubeconfig"),
		containerd: env2("KILN_K8S_CONTAINERD", "/run/kspike/containerd.sock"),
		ownerName:  fmt.Sprintf("kiln-security-test-%d-%s", os.Getpid(), randomHex(4)),
		pods:       map[string]podSeen{},
	}
	k.owner = ownerLabel(k.ownerName)
	cfg, err := clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 50, 100
	if k.cs, err = k8s.NewForConfig(cfg); err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if k.image, k.built, err = kubernetes.BuildImage(ctx, kubernetes.ImageConfig{Agent: exe, Containerd: k.containerd}); err != nil {
		return nil, fmt.Errorf("the runtimes image (is the test cluster up? scripts/k8s/up): %w", err)
	}
	fmt.Fprintf(os.Stderr, "security suite: the suite's runtimes image %s (imported now: %v) in %v\n", k.image, k.built, time.Since(t0).Round(time.Millisecond))
	k.ns = "kiln-security-" + randomHex(4)
	if _, err := k.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: k.ns, Labels: map[string]string{"dev.kiln.test": "security"}}}, metav1.CreateOptions{}); err != nil {
		k.removeImage()
		return nil, fmt.Errorf("create the suite's namespace: %w", err)
	}
	if k.b, err = kubernetes.New(ctx, k.kubeconfig, kubernetes.Options{Namespace: k.ns, Image: k.image, PullPolicy: corev1.PullNever}); err != nil {
		k.close()
		return nil, err
	}
	k.b.SetOwner(k.ownerName)
	wctx, stop := context.WithCancel(context.Background())
	k.stopWatch = stop
	go k.watch(wctx)
	sandboxUID = strconv.Itoa(docker.UID)
	// A first sandbox shows that the suite finds a Pod's processes, and
	// that its PID 1 is the agent (lookUp).
	b, err := k.create(ctx, native.Spec{})
	if err != nil {
		k.close()
		return nil, fmt.Errorf("a first sandbox: %w", err)
	}
	k.destroy(b)
	if k.start, err = k.measureStart(ctx); err != nil {
		k.close()
		return nil, err
	}
	// The harness takes what is on the host now as there before the
	// suite: the first sandbox must be gone first.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		left, err := k.leftovers()
		if err == nil && !slices.ContainsFunc(left, func(l leftover) bool { return l.foreign == "" }) {
			break
		}
		if time.Now().After(deadline) {
			k.close()
			return nil, fmt.Errorf("the first sandbox's Pod is still on the host a minute after its deletion: %v %v", left, err)
		}
	}
	useKubeLines()
	fmt.Fprintf(os.Stderr, "security suite: Pods in namespace %s\n", k.ns)
	return k, nil
}

func (k *kubeSuite) backend() engine.Backend { return k.b }

// watch records every Pod made in the namespace, so that a process or a
// mount of one is known as the suite's after the Pod is deleted.
func (k *kubeSuite) watch(ctx context.Context) {
	for ctx.Err() == nil {
		w, err := k.cs.CoreV1().Pods(k.ns).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Error {
				k.see(p)
			}
		}
		w.Stop()
	}
}

func (k *kubeSuite) see(p *corev1.Pod) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pods[string(p.UID)] = podSeen{name: p.Name, owner: p.Labels[kubeLabelOwner]}
}

func (k *kubeSuite) seen(uid string) (podSeen, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	p, ok := k.pods[uid]
	return p, ok
}

// close deletes the namespace (and with it the NetworkPolicy the backend
// made there) and waits for it to be gone, then removes the image.
func (k *kubeSuite) close() {
	if k.stopWatch != nil {
		k.stopWatch()
	}
	if k.b != nil {
		k.b.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := k.cs.CoreV1().Namespaces().Delete(ctx, k.ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		fmt.Fprintf(os.Stderr, "security suite: delete the namespace %s: %v\n", k.ns, err)
	}
	for {
		_, err := k.cs.CoreV1().Namespaces().Get(ctx, k.ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if ctx.Err() != nil {
			fmt.Fprintf(os.Stderr, "security suite: the namespace %s is still there 3 minutes after its deletion\n", k.ns)
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	k.removeImage()
}

// removeImage removes the image the suite imported: each test binary
// makes its own, and they would pile up in the node's containerd.
func (k *kubeSuite) removeImage() {
	if !k.built {
		return
	}
	out, err := exec.Command("ctr", "--address", k.containerd, "-n", "k8s.io", "images", "rm", k.image).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "security suite: remove the image %s: %v: %s\n", k.image, err, out)
	}
}

// startCost is the median time a cold sandbox Pod took to start, measured
// when the suite began (measureStart).
func (k *kubeSuite) startCost() time.Duration { return k.start }

// measureStart starts and deletes three sandbox Pods, one after another,
// and returns the median of their starts.
func (k *kubeSuite) measureStart(ctx context.Context) (time.Duration, error) {
	var starts []time.Duration
	for range 3 {
		t0 := time.Now()
		sb, err := k.b.CreateSandbox(ctx, backend.Spec{})
		if err != nil {
			return 0, fmt.Errorf("a sandbox to time: %w", err)
		}
		starts = append(starts, time.Since(t0))
		k.b.DestroySandbox(context.Background(), sb.ID)
	}
	slices.Sort(starts)
	fmt.Fprintf(os.Stderr, "security suite: a cold Pod starts in %v (median of %v)\n", starts[1].Round(time.Millisecond), starts)
	return starts[1], nil
}

// create makes a sandbox Pod and looks it up from outside: its container
// in containerd, the host pids of its PID 1 and of the agent.
func (k *kubeSuite) create(ctx context.Context, spec native.Spec) (*box, error) {
	sb, err := k.b.CreateSandbox(ctx, backend.Spec{Limits: spec.Limits, Env: spec.Env, HostDir: spec.HostDir})
	if err != nil {
		return nil, err
	}
	b, err := k.lookUp(ctx, sb.ID)
	if err != nil {
		k.b.DestroySandbox(context.Background(), sb.ID)
		return nil, err
	}
	return b, nil
}

func (k *kubeSuite) lookUp(ctx context.Context, id string) (*box, error) {
	c, err := k.b.Connect(ctx, id)
	if err != nil {
		return nil, err
	}
	p, err := k.cs.CoreV1().Pods(k.ns).Get(ctx, "kiln-"+id, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	k.see(p)
	b := &box{ID: id, Agent: c, HostUID: docker.UID, UserUID: docker.UID, pod: p.Name}
	for _, st := range p.Status.ContainerStatuses {
		if st.Name == "sandbox" {
			_, b.cid, _ = strings.Cut(st.ContainerID, "://")
		}
	}
	if b.cid == "" {
		return nil, fmt.Errorf("the Pod %s has no container id in its status", p.Name)
	}
	for _, pid := range podPIDs(b.cid) {
		st, err := procStatus(pid)
		if err != nil {
			continue
		}
		if ns := strings.Fields(st["NSpid"]); len(ns) > 0 && ns[len(ns)-1] == "1" {
			b.InitPID = pid
		}
	}
	if b.InitPID == 0 {
		return nil, fmt.Errorf("no host process is the PID 1 of the Pod %s (container %s)", p.Name, short(b.cid))
	}
	// The suite's lines about PID 1 (kubeAgentPID1Lines) are for the agent.
	cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", b.InitPID))
	if argv := strings.Split(string(cmd), "\x00"); len(argv) < 2 || argv[1] != kubernetes.AgentArg {
		return nil, fmt.Errorf("PID 1 of the Pod %s (host pid %d) is %q, not the agent", p.Name, b.InitPID, argv)
	}
	return b, nil
}

func (k *kubeSuite) destroy(b *box) error {
	return k.b.DestroySandbox(context.Background(), b.ID)
}

// Where a process is, from its cgroup: the Pod (its uid, as the kubelet
// names the Pod's cgroup: pod<uid>, with _ for - under systemd) and the
// container (its containerd id, the last 64 hex digits).
var (
	podCgroupRE       = regexp.MustCompile(`pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})`)
	containerCgroupRE = regexp.MustCompile(`[0-9a-f]{64}`)
)

// podOf is the uid of the Pod a host process is in and its container's
// id, or "" when it is in none.
func podOf(pid int) (pod, cid string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", ""
	}
	for _, line := range lines(string(b)) {
		if m := podCgroupRE.FindStringSubmatch(line); m != nil {
			pod = strings.ReplaceAll(m[1], "_", "-")
			if ids := containerCgroupRE.FindAllString(line, -1); len(ids) > 0 {
				cid = ids[len(ids)-1]
			}
			return pod, cid
		}
	}
	return "", ""
}

// podProcs are the host processes in any Pod, of any uid (a sandbox Pod
// has containers of two: the sandbox's and the link's), and those of the
// sandbox uid in none.
func podProcs() ([]hostProc, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []hostProc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, err := readProc(pid)
		if err != nil {
			continue
		}
		if uid, _ := podOf(pid); uid != "" || p.uids[0] == docker.UID {
			out = append(out, p)
		}
	}
	return out, nil
}

// podPIDs are the host pids of the processes in a Pod's container, of
// any uid.
func podPIDs(cid string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, c := podOf(pid); c == cid {
			out = append(out, pid)
		}
	}
	return out
}

// podVolumeRE is a mount of the kubelet's for a Pod's volume (the
// emptyDirs of /tmp and /dev/shm are tmpfs mounts on the host).
var podVolumeRE = regexp.MustCompile(`/pods/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/volumes/`)

// leftovers lists what of the suite's sandboxes is on the cluster and the
// host: Pods and PVCs with the suite's owner label, processes in one of
// the namespace's Pods (any container, any uid), and the kubelet's mounts
// for their volumes. A process in a Pod the suite never saw (another
// namespace's) is not looked at; one of the sandbox uid in no Pod (a
// Docker container's) is listed as not the suite's.
func (k *kubeSuite) leftovers() ([]leftover, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The host is read before the Pods are listed: a Pod made in between
	// is listed, so its processes are known as the suite's.
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	procs, err := podProcs()
	if err != nil {
		return nil, err
	}
	pods, err := k.cs.CoreV1().Pods(k.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list the namespace's Pods: %w", err)
	}
	var left []leftover
	for i := range pods.Items {
		p := &pods.Items[i]
		k.see(p)
		if o := p.Labels[kubeLabelOwner]; o == k.owner {
			left = append(left, leftover{what: "pod " + p.Name + " with the suite's owner label"})
		} else {
			left = append(left, leftover{what: "pod " + p.Name, foreign: "a Pod of kiln owner " + o + " in the suite's namespace"})
		}
	}
	pvcs, err := k.cs.CoreV1().PersistentVolumeClaims(k.ns).List(ctx, metav1.ListOptions{LabelSelector: kubeLabelOwner + "=" + k.owner})
	if err != nil {
		return nil, fmt.Errorf("list the namespace's PVCs: %w", err)
	}
	for _, c := range pvcs.Items {
		left = append(left, leftover{what: "persistentvolumeclaim " + c.Name + " with the suite's owner label"})
	}
	for _, p := range procs {
		uid, cid := podOf(p.pid)
		if _, err := readProc(p.pid); err != nil {
			continue // it exited while we looked
		}
		l := leftover{what: p.String() + " in container " + short(cid)}
		switch pod, ok := k.seen(uid); {
		case uid == "":
			l.foreign = "a process of the sandbox uid in no Pod (a Docker container's)"
		case !ok:
			continue // another namespace's Pod
		case pod.owner != k.owner:
			l.foreign = "a process of Pod " + pod.name + " of kiln owner " + pod.owner
		default:
			l.what += " of Pod " + pod.name
		}
		left = append(left, l)
	}
	for _, line := range lines(string(mi)) {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		m := podVolumeRE.FindStringSubmatch(f[4])
		if m == nil {
			continue
		}
		if pod, ok := k.seen(m[1]); ok {
			l := leftover{what: "mount " + f[4] + " of Pod " + pod.name}
			if pod.owner != k.owner {
				l.foreign = "a mount of a Pod of kiln owner " + pod.owner
			}
			left = append(left, l)
		}
	}
	return left, nil
}

// checkGone requires a destroyed sandbox's Pod to be gone from the API
// server, and its processes from the host within the time the host check
// gives (checkNothingLeft's).
func (k *kubeSuite) checkGone(t *testing.T, b *box) {
	t.Helper()
	_, err := k.cs.CoreV1().Pods(k.ns).Get(context.Background(), b.pod, metav1.GetOptions{})
	if err == nil {
		t.Errorf("sandbox %s: its Pod %s is still there after Destroy", b.ID, b.pod)
	} else if !apierrors.IsNotFound(err) {
		t.Errorf("sandbox %s: get its Pod: %v", b.ID, err)
	}
	const settle = kubeSettle
	start := time.Now()
	for deadline := start.Add(settle); ; time.Sleep(50 * time.Millisecond) {
		pids := podPIDs(b.cid)
		if len(pids) == 0 {
			if took := time.Since(start); took > 2*time.Second {
				t.Logf("held differently on Kubernetes: the Pod's processes ended %v after DestroySandbox returned (the kubelet stops them; kubeSettle)", took.Round(10*time.Millisecond))
			}
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range pids {
				if p, err := readProc(pid); err == nil {
					t.Errorf("sandbox %s: %v still runs %v after Destroy", b.ID, p, settle)
				}
			}
			return
		}
	}
}

// userProcs lists the host processes of a Pod's container other than its
// PID 1 and the agent: what user code left running.
func (k *kubeSuite) userProcs(t *testing.T, b *box) []hostProc {
	t.Helper()
	var out []hostProc
	for _, pid := range podPIDs(b.cid) {
		if pid == b.InitPID {
			continue
		}
		if p, err := readProc(pid); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// selfCheck: a Pod of the suite's owner is reported with its processes,
// and no longer once deleted; a Pod of another owner is not the suite's.
func (k *kubeSuite) selfCheck(t *testing.T) {
	s := theSuite
	ctx := t.Context()
	b, err := k.create(ctx, native.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer k.destroy(b)
	if l := s.findLeftover(t, "pod "+b.pod+" with the suite's owner label"); l == nil || l.foreign != "" {
		t.Errorf("the suite's Pod %s is not reported as its leftover: %+v", b.pod, l)
	}
	for _, pid := range []int{b.InitPID} {
		if l := s.findLeftover(t, fmt.Sprintf("process %d ", pid)); l == nil || l.foreign != "" {
			t.Errorf("host pid %d of the suite's Pod is not reported as its leftover: %+v", pid, l)
		}
	}
	if err := k.destroy(b); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if l := s.findLeftover(t, "pod "+b.pod); l == nil {
			break
		} else if time.Now().After(deadline) {
			t.Errorf("a deleted Pod is still reported: %+v", l)
			break
		}
	}

	other, err := kubernetes.New(ctx, k.kubeconfig, kubernetes.Options{Namespace: k.ns, Image: k.image, PullPolicy: corev1.PullNever})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.SetOwner(k.ownerName + "-other")
	sb, err := other.CreateSandbox(ctx, backend.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.DestroySandbox(context.Background(), sb.ID)
	p, err := k.cs.CoreV1().Pods(k.ns).Get(ctx, "kiln-"+sb.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, cid, _ := strings.Cut(p.Status.ContainerStatuses[0].ContainerID, "://")
	pids := podPIDs(cid)
	if len(pids) == 0 {
		t.Fatalf("no host process in the other owner's Pod %s", p.Name)
	}
	if l := s.findLeftover(t, fmt.Sprintf("process %d ", pids[0])); l == nil || l.foreign == "" {
		t.Errorf("a process of another owner's Pod is not listed as foreign: %+v", l)
	}
	if l := s.findLeftover(t, "pod "+p.Name); l == nil || l.foreign == "" {
		t.Errorf("another owner's Pod is not listed as foreign: %+v", l)
	}
}

// useKubeLines makes the Pod's mappings the ones expectLines and the file
// system view use (dockerLines, dockerViewExtra): kubeLines, and the
// lines about PID 1, which is the agent as on Docker.
func useKubeLines() {
	lines := maps.Clone(kubeLines)
	maps.Copy(lines, kubeAgentPID1Lines)
	if n, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil {
		lines["max_user_namespaces 0"] = dockerLine{"max_user_namespaces " + strings.TrimSpace(string(n)),
			"a Pod's container has no user namespace of its own whose count the agent could cap; the host's limit shows, and creating a user namespace needs capabilities the Pod has none of (CapBnd 0, TestPosture)", false}
	}
	// TestSetuidBinariesDoNotElevate counts the host's setuid files, which
	// native and Docker show in /usr.
	if n := hostSetuidFiles(); n > 0 {
		lines["setuid files "+itoa(n)] = dockerLine{"setuid files 0", whyNoSetuid, false}
		lines["ran True"] = dockerLine{"ran False", whyNoSetuid, false}
	}
	dockerLines = lines
	dockerViewExtra = kubeViewExtra
	dockerViewWhy = kubeViewWhy
}

func hostSetuidFiles() int {
	var n int
	for _, top := range []string{"/usr/bin", "/usr/sbin", "/usr/lib", "/usr/libexec"} {
		filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if fi, err := d.Info(); err == nil && fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
					n++
				}
			}
			return nil
		})
	}
	return n
}

// Reasons of the Pod's lines. Those of a gap (the third field true) are
// gaps of the Kubernetes backend against native: the test asserts its
// other lines, then skips naming the gap (scripts/k8s/ci lists the names).
const (
	whyNoSetuid    = "the runtimes image keeps no setuid or setgid bit (internal/backend/kubernetes writes every layer without them): there is nothing to run that could elevate"
	whyPodDev      = "a Pod's /dev is the runtime's tmpfs, which only root may write; natively it is read-only: either way nothing can be made there"
	whyPodHostname = "the Kubernetes backend names a Pod's host kiln, as the Docker backend its containers'"
	whyPodHosts    = "the Pod's hostname is kiln (the kubelet's /etc/hosts names it by the Pod's address): no host is named sandbox"
	whyPodIface    = "a Pod has its interface on the cluster network; the namespace's default-deny NetworkPolicy refuses every connection from it (ENETUNREACH, the lines above)"
	whyPodUserUID  = "no user namespace in a Pod: the file is the process's own and opens; the kernel refuses the write (EPERM/EACCES), which Python reports only when the file is closed, after the probe"
	whyPodSys      = "/sys is the kernel's sysfs, mounted read-only (the runtime masks only /sys/firmware), where Docker masks it with an empty tmpfs and natively there is none: user code reads the host's devices, block layout and CPU facts"
	whyPodCgroupFS = "the Pod's cgroup file systems are mounted read-only under /sys/fs/cgroup: release_agent is there and cannot be written"
)

// kubeLines maps a line native prints to the Pod's (with
// kubeAgentPID1Lines, useKubeLines).
var kubeLines = map[string]dockerLine{
	"write /dev EROFS":            {"write /dev EACCES", whyPodDev, false},
	"mknod /dev/mem EROFS":        {"mknod /dev/mem EACCES", whyPodDev, false},
	"127.0.1.1 sandbox":           {"", whyPodHosts, false},
	"sandbox sandbox sandbox":     {"kiln kiln kiln", whyPodHostname, false},
	"interfaces [(1, 'lo')]":      {"interfaces [(1, 'lo'), (2, 'eth0')]", whyPodIface, false},
	"oom_score_adj -1000 EACCES":  {"oom_score_adj -1000 ok", whyPodUserUID, false},
	"own uid_map EACCES":          {"own uid_map ok", whyPodUserUID, false},
	"list /sys ENOENT":            {"list /sys ok", whyPodSys, true},
	"ls /sys ENOENT":              {"ls /sys ok", whyPodSys, true},
	"cgroup release_agent ENOENT": {"cgroup release_agent EROFS", whyPodCgroupFS, false},
}

// kubeAgentPID1Lines: the agent is the Pod's PID 1, as on Docker, as the
// user's uid and not dumpable, and holds as Docker's does, for Docker's
// reasons (docker_test.go: whySameUID, whyNotDumpable).
var kubeAgentPID1Lines = func() map[string]dockerLine {
	m := map[string]dockerLine{}
	for _, w := range []string{
		"pid 1 visible False", "seen ['python3', 'sleep']", "own only True", "bash ps sort tr ", `["node"] true`,
		"pidfd_send_signal agent EPERM", "read /proc/1/environ ENOENT", "readlink /proc/1/exe ENOENT",
		"open /proc/1/exe ENOENT", "list /proc/1/root ENOENT", "list /proc/1/fd ENOENT", "open /proc/1/mem ENOENT",
		"readlink /proc/1/cwd ENOENT", "read via /proc/1/root ENOENT", "read /proc/1/root/etc/shadow ENOENT",
	} {
		m[w] = dockerLines[w]
	}
	return m
}()

// kubeViewExtra are the entries a Pod's container has beyond native's
// reviewed view (TestGoldenFileSystemView).
var kubeViewExtra = map[string][]string{"/": {"kiln", "sys"}, "/dev": {"mqueue", "termination-log"}}

const kubeViewWhy = "the runtime adds /sys (the read-only sysfs) and /dev/mqueue to every container, and the kubelet /dev/termination-log (TestPosture/mounts); the image holds the agent as /kiln (kiln's own binary, no secret)"

// posture is TestPosture in a Pod: a running user process (pid) seen from
// the host, layer by layer, as the Kubernetes backend makes the Pod.
func (k *kubeSuite) posture(t *testing.T, b *box, pid int) {
	containerPosture(t, b, pid, "held differently on Kubernetes: no user namespace (the Pod's uid is a host uid no account has), as on Docker")
	t.Run("mounts", func(t *testing.T) {
		mounts, err := readMountinfo(pid)
		if err != nil {
			t.Fatal(err)
		}
		byPoint := map[string]mountEntry{}
		for _, m := range mounts {
			byPoint[m.point] = m
		}
		// /usr is the image's, inside the read-only root.
		for _, p := range []string{"/", "/proc/sys", "/sys"} {
			if m, ok := byPoint[p]; !ok || !slices.Contains(m.options, "ro") {
				t.Errorf("%s is not read-only: %+v (present %v)", p, m, ok)
			}
		}
		var gaps []string
		for _, p := range []string{"/tmp", "/dev/shm"} {
			m := byPoint[p]
			if m.fstype != "tmpfs" {
				t.Errorf("%s: want the Pod's memory emptyDir (tmpfs), got %+v", p, m)
			} else if !slices.Contains(m.options, "nosuid") || !slices.Contains(m.options, "nodev") {
				gaps = append(gaps, fmt.Sprintf("%s is a tmpfs without nosuid,nodev (%v): the kubelet mounts a memory emptyDir so, where native's and Docker's tmpfs have both; setuid bits there do not elevate (NoNewPrivs, no capability) and no device node can be made (no CAP_MKNOD)", p, m.options))
			}
		}
		// What user code may write: its tmpfs, the workspace (an emptyDir
		// on the node's disk), the kernel's own file systems; the
		// kubelet's files on the node's disk only if user code cannot
		// write them.
		writable := []string{"tmpfs", "proc", "devpts", "mqueue"}
		var kubelet []string
		for _, m := range mounts {
			switch {
			case !slices.Contains(m.options, "rw") || slices.Contains(writable, m.fstype) || m.point == "/workspace":
			case m.point == "/etc/hosts" || m.point == "/dev/termination-log":
				kubelet = append(kubelet, m.point)
			default:
				t.Errorf("host file system mounted writable at %s: %+v", m.point, m)
			}
		}
		if len(kubelet) > 0 {
			argv := append([]string{"/bin/bash", "-c", `for f in "$@"; do [ -w "$f" ] && echo "$f"; done; true`, "-"}, kubelet...)
			out, _, _ := execIn(t, b, 10*time.Second, argv...)
			for _, f := range lines(out) {
				gaps = append(gaps, f+" is a file of the kubelet's on the node's disk, bind-mounted writable, and user code may write it: it is none of the Pod's size-limited volumes")
			}
			t.Logf("held differently on Kubernetes: the kubelet bind-mounts %v from the node's disk read-write; user code may write only those listed as gaps", kubelet)
		}
		if len(gaps) > 0 {
			kubeGap(t, gaps...)
		}
	})
	t.Run("fds", func(t *testing.T) {
		entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			t.Fatal(err)
		}
		var fds []string
		for _, e := range entries {
			fds = append(fds, e.Name())
		}
		if !slices.Equal(fds, []string{"0", "1", "2"}) {
			t.Errorf("the user process holds descriptors %v, want only 0 1 2", fds)
		}
	})
}
