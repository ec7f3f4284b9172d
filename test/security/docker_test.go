//go:build linux

package security

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/backend/docker"
	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/engine"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// The suite runs on the backend KILN_TEST_BACKEND names: native (the
// default) or docker. scripts/test runs it once on each.
const backendEnv = "KILN_TEST_BACKEND"

// Docker's labels (internal/backend/docker): the suite's containers and
// volumes carry its own owner, so that it never counts another kiln's.
const (
	dockerLabelBackend = "dev.kiln.backend"
	dockerLabelOwner   = "dev.kiln.owner"
)

// dockerSuite is what the suite keeps of the Docker backend: its own
// engine client looks at the containers from outside, as an operator's
// `docker ps` would.
type dockerSuite struct {
	b     *docker.Backend
	cli   *client.Client
	owner string
	image string
	link  string // imageLink, once known
	built bool   // the suite imported the image, so it removes it at the end
}

// onDocker reports whether the suite runs on a container backend: Docker,
// or Kubernetes, whose Pods run the same image as the same uid; what a Pod
// holds otherwise than a container is kubernetes_test.go's.
func (s *suite) onDocker() bool { return s.docker != nil || s.kube != nil }

// newDockerSuite connects to the engine and builds the environment image
// from this test binary (it is the agent: the docker package's init runs
// it in container mode).
func newDockerSuite() (*dockerSuite, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := docker.New(ctx)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ref, built, err := b.BuildImage(ctx, exe)
	if err != nil {
		return nil, err
	}
	b.SetImage(ref)
	d := &dockerSuite{b: b, image: ref, built: built, owner: fmt.Sprintf("kiln-security-test-%d-%s", os.Getpid(), randomHex(4))}
	b.SetOwner(d.owner)
	sandboxUID = strconv.Itoa(docker.UID)
	if n, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil {
		dockerLines["max_user_namespaces 0"] = dockerLine{"max_user_namespaces " + strings.TrimSpace(string(n)),
			"a container has no user namespace of its own whose count the agent could cap; the host's limit shows, and seccomp refuses unshare, clone and setns of namespaces (the lines above)", false}
	}
	if d.cli, err = client.New(client.FromEnv); err != nil {
		return nil, err
	}
	return d, nil
}

// close removes the image the suite imported: each test binary makes its
// own, and they would pile up in the engine.
func (d *dockerSuite) close() {
	if d.built {
		d.cli.ImageRemove(context.Background(), d.image, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	}
	d.cli.Close()
	d.b.Close()
}

// box is a sandbox a test made directly with the suite's backend.
type box struct {
	ID      string
	Agent   *agentclient.Client
	InitPID int    // host pid of the sandbox's PID 1
	HostUID uint32 // host uid of the agent
	UserUID uint32 // host uid of user code
	native  *native.Sandbox
	cid     string // Docker: the container's id; Kubernetes: the Pod's container's, in containerd
	pod     string // Kubernetes: the Pod's name
}

// create makes a container sandbox and looks it up from outside.
func (d *dockerSuite) create(ctx context.Context, spec native.Spec) (*box, error) {
	sb, err := d.b.CreateSandbox(ctx, backend.Spec{Limits: spec.Limits, Env: spec.Env, HostDir: spec.HostDir})
	if err != nil {
		return nil, err
	}
	c, err := d.b.Connect(ctx, sb.ID)
	if err != nil {
		d.b.DestroySandbox(context.Background(), sb.ID)
		return nil, err
	}
	in, err := d.cli.ContainerInspect(ctx, "kiln-"+sb.ID, client.ContainerInspectOptions{})
	if err != nil {
		d.b.DestroySandbox(context.Background(), sb.ID)
		return nil, err
	}
	b := &box{ID: sb.ID, Agent: c, HostUID: docker.UID, UserUID: docker.UID, cid: in.Container.ID}
	if in.Container.State != nil {
		b.InitPID = in.Container.State.Pid
	}
	return b, nil
}

func (d *dockerSuite) destroy(b *box) error {
	return d.b.DestroySandbox(context.Background(), b.ID)
}

// agentPID is the host pid of a container's agent: its PID 1.
func (b *box) agentPID() int { return b.InitPID }

var dockerCgroupRE = regexp.MustCompile(`docker[/-]([0-9a-f]{64})`)

// containerOf is the id of the Docker container a host process is in,
// from its cgroup, or "".
func containerOf(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return ""
	}
	if m := dockerCgroupRE.FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return ""
}

// dockerState is every container on the engine and its owner label
// (empty when it has none). Containers are listed, not inspected: the
// engine answers an inspect only once a container's lock is free, which
// another package's container being made can hold for long.
type dockerState struct {
	owner map[string]string // container id -> dev.kiln.owner
	kiln  map[string]bool   // container id -> is a kiln sandbox
}

func (d *dockerSuite) state(ctx context.Context) (dockerState, error) {
	st := dockerState{owner: map[string]string{}, kiln: map[string]bool{}}
	res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true})
	if err != nil {
		return st, fmt.Errorf("list containers: %w", err)
	}
	for _, c := range res.Items {
		st.owner[c.ID] = c.Labels[dockerLabelOwner]
		st.kiln[c.ID] = c.Labels[dockerLabelBackend] == "docker"
	}
	return st, nil
}

// imageLink is the short name (overlay2's l/<link>) of the suite's image
// layer: a container's root overlay names it in its lowerdir, so a root
// overlay that names it is one of the suite's containers (the image is
// this test binary's, no one else's).
func (d *dockerSuite) imageLink(ctx context.Context) (string, error) {
	if d.link != "" {
		return d.link, nil
	}
	in, err := d.cli.ImageInspect(ctx, d.image)
	if err != nil {
		return "", fmt.Errorf("inspect the suite's image: %w", err)
	}
	g := in.GraphDriver
	if g == nil || g.Name != "overlay2" || g.Data["UpperDir"] == "" {
		return "", fmt.Errorf("the engine's storage driver is %+v: the suite tells its root mounts by overlay2's layer links", g)
	}
	upper := g.Data["UpperDir"]
	b, err := os.ReadFile(filepath.Join(filepath.Dir(upper), "link"))
	if err != nil {
		return "", err
	}
	d.link = strings.TrimSpace(string(b))
	return d.link, nil
}

// foreign says whose a container is when it is not the suite's, or "".
func (st dockerState) foreign(cid, ours string) string {
	o, ok := st.owner[cid]
	switch {
	case !ok || o == ours:
		return ""
	case o != "":
		return "a container of kiln owner " + o
	case st.kiln[cid]:
		return "a kiln container without an owner (another test package's)"
	default:
		return "a container that is not kiln's"
	}
}

// leftovers lists what of the suite's containers is still there: the
// containers and volumes with its owner label, processes of the
// container uid that are in no other owner's container, and the engine's
// mounts (root overlay of the suite's image, container directory). A
// container's cgroups are not looked at: the engine removes them with the
// container, and one whose container is gone cannot be told from another
// package's being torn down; a process in it would be listed.
func (d *dockerSuite) leftovers() ([]leftover, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Mounts and cgroups are read before the containers are listed: a
	// container that appears in between is listed, one that goes away in
	// between is seen again at the next poll.
	mounts, err := dockerMounts()
	if err != nil {
		return nil, err
	}
	procs, err := sandboxProcs(docker.UID, docker.UID+1)
	if err != nil {
		return nil, err
	}
	st, err := d.state(ctx)
	if err != nil {
		return nil, err
	}
	var left []leftover
	for cid, o := range st.owner {
		if o == d.owner {
			left = append(left, leftover{what: "container " + cid[:12] + " with the suite's owner label"})
		}
	}
	vols, err := d.cli.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", dockerLabelOwner+"="+d.owner)})
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	for _, v := range vols.Items {
		left = append(left, leftover{what: "volume " + v.Name + " with the suite's owner label"})
	}
	for _, p := range procs {
		cid := containerOf(p.pid)
		if _, err := readProc(p.pid); err != nil {
			continue // it exited while we looked
		}
		foreign := st.foreign(cid, d.owner)
		if cid == "" {
			// Not in a Docker container at all: the Kubernetes backend's
			// Pods use the same uid.
			foreign = "a process of the container uid outside Docker's containers"
		}
		left = append(left, leftover{what: p.String() + " in container " + short(cid), foreign: foreign})
	}
	link, err := d.imageLink(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range mounts {
		switch {
		case m.cid != "":
			if _, ok := st.owner[m.cid]; !ok {
				left = append(left, leftover{what: "mount " + m.line + " of a container that is gone"})
			}
		case strings.Contains(m.line, "/l/"+link+":") || strings.Contains(m.line, "/l/"+link+","):
			left = append(left, leftover{what: "root overlay of a container of the suite's image: " + m.line})
		}
	}
	return left, nil
}

func short(cid string) string {
	if len(cid) > 12 {
		return cid[:12]
	}
	if cid == "" {
		return "(none)"
	}
	return cid
}

type dockerMount struct {
	path, line, cid string
}

var containerDirRE = regexp.MustCompile(`/containers/([0-9a-f]{64})/`)

// dockerMounts lists the host mounts the engine makes for containers:
// their root overlays and container directories. (Network namespaces
// under /run/docker/netns are not counted: telling whose one is takes an
// inspect of every container; a leaked one holds no data of the sandbox.)
func dockerMounts() ([]dockerMount, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []dockerMount
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		p := f[4]
		switch {
		case strings.HasPrefix(p, "/var/lib/docker/overlay2/") && strings.HasSuffix(p, "/merged"):
			out = append(out, dockerMount{path: p, line: line})
		case strings.HasPrefix(p, "/var/lib/docker/containers/"):
			m := containerDirRE.FindStringSubmatch(p)
			if m == nil {
				continue
			}
			// A container directory's mount belongs to its container
			// while that exists: keyed by the directory itself.
			out = append(out, dockerMount{path: "/var/lib/docker/containers/" + m[1], line: line, cid: m[1]})
		}
	}
	return out, nil
}

// checkGoneDocker requires a destroyed container sandbox to be gone from
// the engine, with no process left in it.
func (s *suite) checkGoneDocker(t *testing.T, b *box) {
	t.Helper()
	_, err := s.docker.cli.ContainerInspect(context.Background(), b.cid, client.ContainerInspectOptions{})
	if err == nil {
		t.Errorf("sandbox %s: its container %s is still there after Destroy", b.ID, short(b.cid))
	} else if !cerrdefs.IsNotFound(err) {
		t.Errorf("sandbox %s: inspect its container: %v", b.ID, err)
	}
	procs, _ := sandboxProcs(docker.UID, docker.UID+1)
	for _, p := range procs {
		if containerOf(p.pid) == b.cid {
			t.Errorf("sandbox %s: %v still runs after Destroy", b.ID, p)
		}
	}
}

// dockerUserProcs lists the host processes of a container other than its
// init and its agent: what user code left running.
func dockerUserProcs(t *testing.T, b *box) []hostProc {
	t.Helper()
	if theSuite.kube != nil {
		return theSuite.kube.userProcs(t, b)
	}
	procs, err := sandboxProcs(docker.UID, docker.UID+1)
	if err != nil {
		t.Fatal(err)
	}
	var out []hostProc
	for _, p := range procs {
		if containerOf(p.pid) == b.cid && p.pid != b.agentPID() {
			out = append(out, p)
		}
	}
	return out
}

// skipOnDocker skips a case that has no meaning in a container, naming
// why. scripts/test accepts a skip in the Docker run only when its reason
// begins with dockerNotApplicable.
func skipOnDocker(t *testing.T, s *suite, why string) {
	t.Helper()
	if s.kube != nil {
		skipOnKube(t, why)
	}
	if s.onDocker() {
		t.Skip(dockerNotApplicable + why)
	}
}

const dockerNotApplicable = "not applicable on the Docker backend: "

// sandboxUID is the uid user code has inside a sandbox: 1000 in native's
// user namespace; the host uid docker.UID on Docker, which maps no user
// namespace.
var sandboxUID = "1000"

// dockerLine is how Docker holds one probe that native holds otherwise:
// the line the probe prints there, and why. A gap is a difference that
// leaves user code more than native does; the test asserts the rest of
// its lines and then skips, naming the gap, so CI lists it.
type dockerLine struct {
	line string // "" when the probe prints nothing there
	why  string
	gap  bool
}

// Reasons shared by several lines.
const (
	whyDevTmpfs    = "Docker's /dev is a tmpfs only root may write; natively it is read-only: either way nothing can be made there"
	whyFamily      = "Engine 20.10 answers a socket family the profile refuses with its default errno, EPERM (docs/DOCKER.md, Seccomp); the family is refused all the same"
	whyNoIPv6      = "the engine disables IPv6 in a container's network namespace, so an IPv6 address is not even assignable; there is no route out either way"
	whySameUID     = "the agent (the container's PID 1, kiln) runs as the user's uid and /proc has no hidepid, so user code sees it by name and status, where natively each program sees only its own processes; it cannot read the agent's memory, descriptors or environment (whyNotDumpable), trace it, or signal it to any effect (TestKillAllFromUserCode), and everything it can see in the container is its own session's (docs/DOCKER.md: one uid in a container)"
	whyNotDumpable = "PID 1 is visible in a container (whySameUID), but the agent makes itself not dumpable, so its /proc entries belong to root and refuse user code: EACCES where natively PID 1 does not exist for user code (ENOENT)"
	whyUserUID     = "no user namespace under Docker: the file is the process's own and opens; the kernel refuses the write (EPERM/EACCES), which Python reports only when the file is closed, after the probe"
	whySys         = "a container always has a /sys mount point; the Docker backend masks it with an empty read-only tmpfs (maskedPaths), where natively there is none"
)

// dockerLines maps a line native prints to Docker's, for expectLines.
var dockerLines = map[string]dockerLine{
	"write /dev EROFS":                          {"write /dev EACCES", whyDevTmpfs, false},
	"mknod /dev/mem EROFS":                      {"mknod /dev/mem EACCES", whyDevTmpfs, false},
	"AF_VSOCK EAFNOSUPPORT":                     {"AF_VSOCK EPERM", whyFamily, false},
	"AF_ALG EAFNOSUPPORT":                       {"AF_ALG EPERM", whyFamily, false},
	"AF_PACKET raw EAFNOSUPPORT":                {"AF_PACKET raw EPERM", whyFamily, false},
	"AF_PACKET dgram EAFNOSUPPORT":              {"AF_PACKET dgram EPERM", whyFamily, false},
	"AF_KEY EAFNOSUPPORT":                       {"AF_KEY EPERM", whyFamily, false},
	"AF_BLUETOOTH EAFNOSUPPORT":                 {"AF_BLUETOOTH EPERM", whyFamily, false},
	"AF_CAN EAFNOSUPPORT":                       {"AF_CAN EPERM", whyFamily, false},
	"AF_RDS EAFNOSUPPORT":                       {"AF_RDS EPERM", whyFamily, false},
	"AF_TIPC EAFNOSUPPORT":                      {"AF_TIPC EPERM", whyFamily, false},
	"AF_XDP EAFNOSUPPORT":                       {"AF_XDP EPERM", whyFamily, false},
	"AF_NETLINK audit EAFNOSUPPORT":             {"AF_NETLINK audit EPERM", whyFamily, false},
	"AF_NETLINK uevent EAFNOSUPPORT":            {"AF_NETLINK uevent EPERM", whyFamily, false},
	"AF_NETLINK netfilter EAFNOSUPPORT":         {"AF_NETLINK netfilter EPERM", whyFamily, false},
	"socketpair AF_PACKET EAFNOSUPPORT":         {"socketpair AF_PACKET EPERM", whyFamily, false},
	"AF_INET ping EACCES":                       {"AF_INET ping ok", "the engine sets net.ipv4.ping_group_range to every group in a container's network namespace; under --network none that namespace has only loopback, so an ICMP socket reaches nothing", false},
	"tcp [2606:4700:4700::1111]:80 ENETUNREACH": {"tcp [2606:4700:4700::1111]:80 EADDRNOTAVAIL", whyNoIPv6, false},
	"::1 ECONNREFUSED":                          {"::1 EADDRNOTAVAIL", whyNoIPv6, false},
	"127.0.1.1 sandbox":                         {"", "the container's hostname is kiln and the engine's /etc/hosts under --network none gives it no address", false},
	"sandbox sandbox sandbox":                   {"kiln kiln kiln", "the Docker backend names its containers' host kiln", false},
	"oom_score_adj -1000 EACCES":                {"oom_score_adj -1000 ok", whyUserUID, false},
	"own uid_map EACCES":                        {"own uid_map ok", whyUserUID, false},
	"list /sys ENOENT":                          {"list /sys ok", whySys, false},
	"ls /sys ENOENT":                            {"ls /sys ok", whySys, false},
	"pidfd_send_signal agent EPERM": {"pidfd_send_signal agent ok",
		"PID 1 is the agent and runs as the user's uid: the signal is sent, and the kernel drops SIGKILL to a namespace's init from inside it (it still runs: the test's host checks)", false},
	"pid 1 visible False":                 {"pid 1 visible True", whySameUID, false},
	"read /proc/1/environ ENOENT":         {"read /proc/1/environ EACCES", whyNotDumpable, false},
	"readlink /proc/1/exe ENOENT":         {"readlink /proc/1/exe EACCES", whyNotDumpable, false},
	"open /proc/1/exe ENOENT":             {"open /proc/1/exe EACCES", whyNotDumpable, false},
	"list /proc/1/root ENOENT":            {"list /proc/1/root EACCES", whyNotDumpable, false},
	"list /proc/1/fd ENOENT":              {"list /proc/1/fd EACCES", whyNotDumpable, false},
	"open /proc/1/mem ENOENT":             {"open /proc/1/mem EACCES", whyNotDumpable, false},
	"readlink /proc/1/cwd ENOENT":         {"readlink /proc/1/cwd EACCES", whyNotDumpable, false},
	"read via /proc/1/root ENOENT":        {"read via /proc/1/root EACCES", whyNotDumpable, false},
	"read /proc/1/root/etc/shadow ENOENT": {"read /proc/1/root/etc/shadow EACCES", whyNotDumpable, false},
	"seen ['python3', 'sleep']":           {"seen ['kiln', 'python3', 'sleep']", whySameUID, false},
	"own only True":                       {"own only False", whySameUID, false},
	"bash ps sort tr ":                    {"bash kiln ps sort tr ", whySameUID, false},
	`["node"] true`:                       {`["kiln","node"] true`, whySameUID, false},
}

// onDockerWant rewrites want for the Docker backend (dockerLines) and
// returns the gaps among the lines it rewrote; on native it returns want.
func onDockerWant(t *testing.T, want []string) ([]string, []string) {
	t.Helper()
	if theSuite == nil || !theSuite.onDocker() {
		return want, nil
	}
	var out, gaps []string
	for _, w := range want {
		d, ok := dockerLines[w]
		if !ok {
			out = append(out, w)
			continue
		}
		t.Logf("held differently on %s: %q is %q: %s", containerBackend(), w, d.line, d.why)
		if d.line != "" {
			out = append(out, d.line)
		}
		if d.gap && !slices.Contains(gaps, d.why) {
			gaps = append(gaps, d.why)
		}
	}
	return out, gaps
}

// dockerGap skips the rest of a test on Docker, naming a gap the Docker
// backend has against native. Called after a test's own assertions, it
// keeps their verdict: a test that failed stays failed.
func dockerGap(t *testing.T, gaps ...string) {
	t.Helper()
	if len(gaps) > 0 && theSuite.kube != nil {
		kubeGap(t, gaps...)
	}
	if len(gaps) > 0 {
		t.Skip(dockerGapPrefix + strings.Join(gaps, "; "))
	}
}

// The prefixes of the only skips scripts/test accepts in the Docker run.
const dockerGapPrefix = "known gap of the Docker backend (issue 14): "

// dockerViewExtra are the entries a container has beyond native's
// reviewed view (TestGoldenFileSystemView).
var dockerViewExtra = map[string][]string{"/": {".dockerenv", "kiln", "run", "sys"}, "/dev": {"mqueue"}, "/etc": {"mtab"}}

var dockerViewWhy = "the engine adds /.dockerenv, /etc/mtab (a link to /proc/self/mounts), /dev/mqueue and /sys (masked: empty) to every container; /run holds the sockets the service binds in (/run/kiln/agent.sock, and egress.sock under a network policy); the image holds the agent as /kiln (kiln's own binary, no secret)"

// wantDir is the reviewed listing of the sandbox's root.
func wantDir(dir string) []string {
	want := withHostEntries(goldenRoot, goldenRootIfOnHost, dir)
	if theSuite != nil && theSuite.onDocker() {
		want = append(want, dockerViewExtra[dir]...)
		slices.Sort(want)
	}
	return want
}

// requireHitDocker is requireHit on Docker. The container's cgroup
// enforces memory and pids, but the agent in a container has no cgroup
// handles to report a limit per execution (Capabilities.Limits is
// false): a memory limit shows as the OOM killer's SIGKILL; a pids limit
// shows as nothing, and the run is held to its timeout (requireStoppedBy)
// and the health check.
func requireHitDocker(t *testing.T, res result, limits ...kiln.LimitHit) {
	t.Helper()
	t.Logf("held differently on Docker: limits are enforced, not reported per execution (want one of %v, got %v)", limits, res.Exit.Limits)
	if slices.Contains(limits, kiln.HitMemory) && res.Exit.Signal != "SIGKILL" {
		t.Errorf("want the program killed (SIGKILL) at the memory limit:\n%v", res)
	}
}

const nativeLeftovers = "native's sandbox uids and cgroups are not what the Docker run looks for; its subtest docker checks the Docker leftovers"

// dockerSelfCheck: a container of the suite's owner is reported with its
// processes, and no longer once removed; a container of another owner is
// not the suite's.
func (s *suite) dockerSelfCheck(t *testing.T) {
	if s.kube != nil {
		s.kube.selfCheck(t)
		return
	}
	ctx := t.Context()
	b, err := s.docker.create(ctx, native.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.docker.destroy(b)
	if l := s.findLeftover(t, "container "+short(b.cid)+" with the suite's owner label"); l == nil || l.foreign != "" {
		t.Errorf("the suite's container %s is not reported as its leftover: %+v", short(b.cid), l)
	}
	if l := s.findLeftover(t, fmt.Sprintf("process %d ", b.InitPID)); l == nil || l.foreign != "" {
		t.Errorf("the init (host pid %d) of the suite's container is not reported as its leftover: %+v", b.InitPID, l)
	}
	if err := s.docker.destroy(b); err != nil {
		t.Fatal(err)
	}
	if l := s.findLeftover(t, "container "+short(b.cid)); l != nil {
		t.Errorf("a removed container is still reported: %+v", l)
	}

	other, err := docker.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.SetImage(s.docker.image)
	other.SetOwner(s.docker.owner + "-other")
	sb, err := other.CreateSandbox(ctx, backend.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.DestroySandbox(context.Background(), sb.ID)
	in, err := s.docker.cli.ContainerInspect(ctx, "kiln-"+sb.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := s.findLeftover(t, fmt.Sprintf("process %d ", in.Container.State.Pid)); l == nil || l.foreign == "" {
		t.Errorf("the init of another owner's container is not listed as foreign: %+v", l)
	}
	if l := s.findLeftover(t, "container "+short(in.Container.ID)); l != nil {
		t.Errorf("another owner's container is listed as the suite's: %+v", l)
	}
}

// containerPosture is what TestPosture checks of a user process (pid) in
// a container the same way on Docker and on Kubernetes: its status (no
// capabilities, no new privileges, seccomp, the sandbox's uid), its
// namespaces, and its cgroups (the container's, b.cid), held differently
// as held says.
func containerPosture(t *testing.T, b *box, pid int, held string) {
	t.Run("status", func(t *testing.T) {
		st, err := procStatus(pid)
		if err != nil {
			t.Fatal(err)
		}
		ids := fmt.Sprintf("%d\t%d\t%d\t%d", docker.UID, docker.UID, docker.UID, docker.UID)
		for k, want := range map[string]string{
			"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
			"CapBnd": "0000000000000000", "CapAmb": "0000000000000000",
			"NoNewPrivs": "1", "Seccomp": "2", "Uid": ids, "Gid": ids,
		} {
			if got := st[k]; got != want {
				t.Errorf("/proc/%d/status %s: %q, want %q", pid, k, got, want)
			}
		}
		// The engine (Docker) or the Pod's fsGroup gives the user its own
		// gid as a supplementary group.
		if g := st["Groups"]; g != "" && g != strconv.Itoa(docker.UID) {
			t.Errorf("/proc/%d/status Groups: %q, want none but the user's own gid", pid, g)
		}
	})
	t.Run("namespaces", func(t *testing.T) {
		for _, ns := range []string{"mnt", "pid", "net", "ipc", "uts"} {
			mine, _ := os.Readlink("/proc/self/ns/" + ns)
			theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
			if err != nil {
				t.Fatal(err)
			}
			if mine == theirs {
				t.Errorf("namespace %s: the user process shares the host's %s", ns, mine)
			}
		}
		t.Log(held)
	})
	t.Run("cgroup", func(t *testing.T) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			t.Fatal(err)
		}
		var n int
		for _, line := range lines(string(data)) {
			f := strings.SplitN(line, ":", 3)
			if len(f) != 3 {
				continue
			}
			ctrls := strings.Split(f[1], ",")
			if slices.Contains(ctrls, "memory") || slices.Contains(ctrls, "pids") || slices.Contains(ctrls, "cpu") || f[0] == "0" && f[1] == "" {
				if !strings.Contains(f[2], b.cid) {
					t.Errorf("user process is in cgroup %q of %q, want the container's (%s)", f[2], f[1], short(b.cid))
				}
				n++
			}
		}
		if n == 0 {
			t.Errorf("no memory, pids or cpu cgroup in /proc/%d/cgroup:\n%s", pid, data)
		}
	})
}

// dockerPosture is TestPosture on Docker: a running user process (pid)
// seen from the host, layer by layer, as the Docker backend makes it.
func (s *suite) dockerPosture(t *testing.T, b *box, pid int) {
	if s.kube != nil {
		s.kube.posture(t, b, pid)
		return
	}
	containerPosture(t, b, pid, "held differently on Docker: no user namespace (the container's uid is a host uid no account has) and, on cgroup v1, the host's cgroup namespace with the container's cgroups mounted read-only")
	t.Run("mounts", func(t *testing.T) {
		mounts, err := readMountinfo(pid)
		if err != nil {
			t.Fatal(err)
		}
		byPoint := map[string]mountEntry{}
		for _, m := range mounts {
			byPoint[m.point] = m
		}
		for _, p := range []string{"/", "/usr", "/proc/sys"} {
			if m, ok := byPoint[p]; !ok || !slices.Contains(m.options, "ro") {
				t.Errorf("%s is not read-only: %+v (present %v)", p, m, ok)
			}
		}
		// /sys and /proc/pressure are masked (maskedPaths): empty, read-only.
		for _, p := range []string{"/sys", "/proc/pressure"} {
			if m := byPoint[p]; m.fstype != "tmpfs" || !slices.Contains(m.options, "ro") {
				t.Errorf("%s: want it masked by an empty read-only tmpfs, got %+v", p, m)
			}
		}
		for _, p := range []string{"/tmp", "/dev/shm"} {
			if m := byPoint[p]; m.fstype != "tmpfs" || !slices.Contains(m.options, "nosuid") || !slices.Contains(m.options, "nodev") {
				t.Errorf("%s: want a nosuid,nodev tmpfs, got %+v", p, m)
			}
		}
		// What user code may write: its tmpfs, the workspace, the
		// kernel's own file systems.
		writable := []string{"tmpfs", "proc", "devpts", "mqueue"}
		for _, m := range mounts {
			if slices.Contains(m.options, "rw") && !slices.Contains(writable, m.fstype) && m.point != "/workspace" {
				t.Errorf("host file system mounted writable at %s: %+v", m.point, m)
			}
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

// attackCancel is attackRun for a run whose context the test cancels, on
// Docker: if the cancel came while the engine was still starting the
// container (held differently from native, whose sandbox starts in a few
// milliseconds), the run ends there with the context's error, and
// attackCancel reports it (early) instead of failing.
func attackCancel(t *testing.T, ctx context.Context, r engine.Run) (res result, early bool) {
	t.Helper()
	if theSuite.kube != nil {
		kubeGate(t)
	}
	res = theSuite.run(ctx, r)
	theSuite.checkHost(t, r.Language+" attack")
	switch {
	case res.Err != nil && ctx.Err() != nil:
		t.Logf("held differently on Docker: the cancel came while the engine was starting the container, and ended the run there: %v", res.Err)
		return res, true
	case res.Err != nil:
		t.Fatalf("engine.Run: %v\n%v", res.Err, res)
	}
	theSuite.checkNoSecrets(t, res.Stdout+res.Stderr)
	return res, false
}

// sandboxGroups is how Python prints os.getgroups() of user code, with
// U for sandboxUID: none natively; on Docker the engine gives the
// container's user its own gid as its one supplementary group.
func sandboxGroups() string {
	if theSuite != nil && theSuite.onDocker() {
		return "[U]"
	}
	return "[]"
}
