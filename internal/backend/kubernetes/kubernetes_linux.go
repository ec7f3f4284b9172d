package kubernetes

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/kiln-dev/kiln/internal/agent"
	"github.com/kiln-dev/kiln/internal/agentclient"
	"github.com/kiln-dev/kiln/internal/backend"
	"github.com/kiln-dev/kiln/internal/backend/docker"
	"github.com/kiln-dev/kiln/internal/backend/kubernetes/podlink"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// Labels on everything the backend makes; List and reaping select on
// them and touch nothing else in the namespace.
const (
	labelManaged = "app.kubernetes.io/managed-by"
	labelBackend = "dev.kiln.backend"
	labelSandbox = "dev.kiln.sandbox"
	labelOwner   = "dev.kiln.owner"
	// labelReplica names the kiln replica using the sandbox, when kiln
	// runs as replicas (SetReplica): another replica destroys the Pods of
	// one that is gone and that no session will take over.
	labelReplica = "dev.kiln.replica"
)

// policyName is the namespace's default-deny NetworkPolicy for sandbox Pods.
const policyName = "kiln-sandbox-deny"

// Options choose how sandbox Pods are made.
type Options struct {
	Namespace string // default "default"
	Image     string // the runtimes image (BuildImage), required
	// PullPolicy of the image; "Never" for images imported into the
	// node's runtime (the test cluster), else IfNotPresent.
	PullPolicy corev1.PullPolicy
	// RuntimeClassName, when set, runs Pods under that RuntimeClass
	// (gVisor, Kata).
	RuntimeClassName string
	// ExtendedResources are the extended resources (nvidia.com/gpu) a
	// sandbox may ask for, each with the most one sandbox may have (0: no
	// bound but the nodes'); backend.CheckResources. Empty: none.
	ExtendedResources map[string]int64
	// Workspace is where a session's workspace lives: WorkspaceEmptyDir
	// (the default: the Pod's, gone with it) or WorkspacePVC (a
	// PersistentVolumeClaim per workspace, of StorageClass, "" for the
	// cluster's default class; it outlives Pods and kiln restarts and is
	// deleted once the session has ended: PruneWorkspaces).
	Workspace    string
	StorageClass string
	// WarmPods, when above 0, keeps that many sandbox Pods started ahead
	// (pool_linux.go), of WarmLimits (zero fields: kiln's defaults); a
	// sandbox asking for exactly those limits, with no extended
	// resources, no PVC workspace and no extra environment, takes one.
	WarmPods   int
	WarmLimits kiln.Limits
}

// Backend makes sandboxes as Pods.
type Backend struct {
	cfg   *rest.Config
	cs    kubernetes.Interface
	opt   Options
	owner string
	// replica is the kiln replica's id (SetReplica), on every Pod's
	// labelReplica; "" without replicas.
	replica string
	// apiServer is the API server's address from a Pod (host:port), or
	// "" when kiln cannot tell it: each sandbox's agent checks it cannot
	// reach it (isolatedFrom).
	apiServer string
	mu        sync.Mutex
	conns     map[string]*agentclient.Client
	stop      chan struct{} // closed by Close: ends the pruning of workspaces and the warm pool
	closeOnce sync.Once
	pool      *warmPool // nil without WarmPods, or until it starts
	poolOnce  sync.Once
}

// New connects with the kubeconfig at path ("" for the in-cluster
// config) and checks that the API server answers.
func New(ctx context.Context, kubeconfig string, opt Options) (*Backend, error) {
	switch opt.Workspace {
	case "":
		opt.Workspace = WorkspaceEmptyDir
	case WorkspaceEmptyDir, WorkspacePVC:
	default:
		return nil, kiln.Errorf(kiln.Invalid, "workspace kind %q: want %s (the Pod's own) or %s (a PersistentVolumeClaim per session)", opt.Workspace, WorkspaceEmptyDir, WorkspacePVC)
	}
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return nil, kiln.Wrap(kiln.SandboxError, err, "cannot load the Kubernetes client configuration")
	}
	// Creating a sandbox polls its Pod; client-go's default of 5 requests
	// a second would throttle a few concurrent creates.
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, kiln.Wrap(kiln.SandboxError, err, "cannot make a Kubernetes client")
	}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		return nil, kiln.Wrap(kiln.SandboxError, err, "the Kubernetes API server does not answer")
	}
	if opt.Namespace == "" {
		opt.Namespace = "default"
	}
	if opt.PullPolicy == "" {
		opt.PullPolicy = corev1.PullIfNotPresent
	}
	b := &Backend{cfg: cfg, cs: cs, opt: opt, conns: map[string]*agentclient.Client{}, stop: make(chan struct{})}
	if err := b.ensurePolicy(ctx); err != nil {
		return nil, err
	}
	b.apiServer = apiServerAddr(ctx, cs)
	if opt.Workspace == WorkspacePVC {
		go b.pruneEvery(time.Minute)
	}
	if opt.WarmPods > 0 {
		if err := opt.WarmLimits.Validate(); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// pruneEvery deletes ended sessions' workspace PVCs every period, until
// Close.
func (b *Backend) pruneEvery(period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), period)
			b.PruneWorkspaces(ctx)
			cancel()
		}
	}
}

// apiServerAddr is the API server as a Pod reaches it, the kubernetes
// Service (or, where kiln may not read it, the address the kubelet gives
// kiln's own Pod): the address a sandbox must not reach.
func apiServerAddr(ctx context.Context, cs kubernetes.Interface) string {
	if svc, err := cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{}); err == nil && svc.Spec.ClusterIP != "" && len(svc.Spec.Ports) > 0 {
		return net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(svc.Spec.Ports[0].Port))
	}
	if h, p := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"); h != "" && p != "" {
		return net.JoinHostPort(h, p)
	}
	return ""
}

// ExtendedResources are the extended resources a sandbox may ask for
// (Options.ExtendedResources), for the service's check of a request.
func (b *Backend) ExtendedResources() map[string]int64 {
	return maps.Clone(b.opt.ExtendedResources)
}

// SetOwner names the kiln that makes sandboxes, so that two kilns in one
// namespace never list, and so never reap, each other's Pods. The label
// carries a hash of it (a label value is short and plain).
func (b *Backend) SetOwner(owner string) {
	sum := sha256.Sum256([]byte(owner))
	b.owner = hex.EncodeToString(sum[:])[:40]
}

func (b *Backend) labels(id string) map[string]string {
	l := map[string]string{labelManaged: "kiln", labelBackend: "kubernetes", labelSandbox: id}
	if b.owner != "" {
		l[labelOwner] = b.owner
	}
	if b.replica != "" {
		l[labelReplica] = b.replica
	}
	return l
}

// SetReplica names the kiln replica this backend serves (a label value:
// letters, digits, '-', '_' and '.', at most 63), before it makes any
// sandbox.
func (b *Backend) SetReplica(id string) {
	if len(id) <= 63 && strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == "" {
		b.replica = id
	}
}

// SandboxesByReplica returns the sandboxes of every kiln replica in the
// namespace, by the replica labelReplica names (Pods without one are
// left out: they are no replica's), not those being deleted.
func (b *Backend) SandboxesByReplica(ctx context.Context) (map[string][]string, error) {
	res, err := b.cs.CoreV1().Pods(b.opt.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labelManaged + "=kiln," + labelBackend + "=kubernetes," + labelReplica})
	if err != nil {
		return nil, kiln.Wrap(kiln.SandboxError, err, "cannot list Pods")
	}
	out := map[string][]string{}
	for _, p := range res.Items {
		if id, r := p.Labels[labelSandbox], p.Labels[labelReplica]; id != "" && r != "" && p.DeletionTimestamp == nil {
			out[r] = append(out[r], id)
		}
	}
	return out, nil
}

func (b *Backend) selector() string {
	s := labelManaged + "=kiln," + labelBackend + "=kubernetes"
	if b.owner != "" {
		s += "," + labelOwner + "=" + b.owner
	}
	return s
}

// ensurePolicy makes the default-deny NetworkPolicy of sandbox Pods: no
// ingress, no egress. (Egress to kiln's proxy is issue 15's next step.)
func (b *Backend) ensurePolicy(ctx context.Context) error {
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName, Labels: map[string]string{labelManaged: "kiln"}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{labelManaged: "kiln", labelBackend: "kubernetes"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	_, err := b.cs.NetworkingV1().NetworkPolicies(b.opt.Namespace).Create(ctx, np, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return kiln.Wrap(kiln.SandboxError, err, "cannot create the sandboxes' NetworkPolicy")
	}
	return nil
}

// Close closes every agent connection and deletes the warm pool's Pods.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		if b.stop != nil {
			close(b.stop)
		}
	})
	b.thePool().wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, c := range b.conns {
		c.Close()
		delete(b.conns, id)
	}
	return nil
}

// Reap deletes every sandbox List finds (this owner's, by label) and
// returns how many. Workspace PVCs stay, for the sessions that go on in
// new Pods, but those of ended sessions go (PruneWorkspaces).
func (b *Backend) Reap(ctx context.Context) (int, error) {
	defer b.fillPool()
	ids, err := b.List(ctx)
	if err != nil {
		return 0, err
	}
	for i, id := range ids {
		if err := b.DestroySandbox(ctx, id); err != nil {
			return i, err
		}
	}
	if b.opt.Workspace == WorkspacePVC {
		if _, err := b.PruneWorkspaces(ctx); err != nil {
			return len(ids), err
		}
	}
	return len(ids), nil
}

// CreateSandbox creates the Pod, waits for it to run, reaches the agent in
// it and returns once the agent answers.
func (b *Backend) CreateSandbox(ctx context.Context, spec backend.Spec) (_ backend.Sandbox, err error) {
	if b.opt.Image == "" {
		return backend.Sandbox{}, kiln.Errorf(kiln.SandboxError, "the Kubernetes backend has no image: BuildImage makes the runtimes image")
	}
	// spec.HostDir is the service's workspace directory on its own host,
	// which a Pod on another node cannot see: the workspace is the Pod's
	// emptyDir, and files reach it through the agent, as the service's
	// file operations always go. Host mounts have no such way in.
	if len(spec.Mounts) > 0 {
		return backend.Sandbox{}, kiln.Errorf(kiln.Unsupported, "the Kubernetes backend cannot show host folders in a Pod: no mounts (--mount-root, environments) with --backend kubernetes")
	}
	if err := spec.Limits.Validate(); err != nil {
		return backend.Sandbox{}, err
	}
	if err := backend.CheckResources(spec.Resources, b.opt.ExtendedResources); err != nil {
		return backend.Sandbox{}, err
	}
	lim := spec.Limits.WithDefaults()
	// A session's workspace (spec.HostDir names it) on a PVC; a one-shot
	// run's, which nothing keeps, stays the Pod's.
	claim := ""
	if b.opt.Workspace == WorkspacePVC && spec.HostDir != "" {
		if claim, err = b.ensureClaim(ctx, spec.HostDir, lim.WorkspaceBytes); err != nil {
			return backend.Sandbox{}, err
		}
	}
	var id string
	var c *agentclient.Client
	b.fillPool()
	if claim == "" && len(spec.Resources) == 0 && len(spec.Env) == 0 {
		id, c = b.thePool().claim(ctx, lim)
	}
	if c == nil {
		if id, c, err = b.start(ctx, newID(), lim, spec.Resources, claim, spec.Env); err != nil {
			return backend.Sandbox{}, err
		}
	}
	b.mu.Lock()
	b.conns[id] = c
	b.mu.Unlock()
	return backend.Sandbox{ID: id}, nil
}

// start creates a Pod, waits for it to run, reaches the agent in it and
// returns once the agent answers and the Pod is cut off the network.
func (b *Backend) start(ctx context.Context, id string, lim kiln.Limits, extended map[string]int64, claim string, env []string) (_ string, _ *agentclient.Client, err error) {
	pods := b.cs.CoreV1().Pods(b.opt.Namespace)
	if _, err := pods.Create(ctx, b.pod(id, lim, extended, claim, env), metav1.CreateOptions{}); err != nil {
		return "", nil, kiln.Wrap(kiln.SandboxError, err, "cannot create the Pod")
	}
	defer func() {
		if err != nil {
			b.remove(context.Background(), id)
		}
	}()
	c, err := b.reach(ctx, id, extended)
	if err != nil {
		return "", nil, err
	}
	return id, c, nil
}

// dial reaches the agent of a running Pod: an exec stream runs the
// bridge (BridgeArg) there, and the agent's hello comes through it. The
// agent serves the newest of kiln's connections, so dialling takes a
// sandbox from another replica.
func (b *Backend) dial(ctx context.Context, id string) (*agentclient.Client, error) {
	conn, err := b.exec(id, []string{"/kiln", BridgeArg})
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, podlink.BridgeWait+5*time.Second)
	defer cancel()
	c, err := agentclient.Dial(dctx, conn)
	if err != nil {
		conn.Close()
		return nil, kiln.Wrap(kiln.SandboxError, fmt.Errorf("%w; the Pod said: %s", err, conn.stderr()), "cannot reach the sandbox's agent")
	}
	return c, nil
}

// The link container's share: its bridges only copy bytes. Its CPU is
// taken out of the session's, so that the Pod asks a node for exactly
// the session's CPU (two 1-CPU sandboxes fit 2 CPUs), and every
// container's requests equal its limits: the Pod's QoS class is
// Guaranteed, whose oom_score_adj (-997) lets the agent put user
// processes far ahead of itself for the OOM killer (a Burstable Pod's,
// near 1000, let a memory bomb of small processes take the agent).
const (
	linkMemory = "32Mi"
	linkCPU    = 50 // millicores, of a session of 200 or more
)

// linkMillis is the link container's CPU for a session of cpu millicores.
func linkMillis(cpu int64) int64 {
	if cpu < 4*linkCPU {
		return max(1, cpu/4)
	}
	return linkCPU
}

// pod is the sandbox's Pod: the security context, the sandbox
// container's requests equal to its limits, sizes from the session's
// limits, and the extended resources (GPUs) it asked for, which
// Kubernetes takes only with requests equal to limits. The workspace is
// the PVC claim, or with none an emptyDir. The link container holds the
// bridges (agent_linux.go).
func (b *Backend) pod(id string, lim kiln.Limits, extended map[string]int64, claim string, env []string) *corev1.Pod {
	uid, link := int64(docker.UID), int64(linkUID)
	// OpenFiles and FileSize: each program runs through the agent's
	// rlimit stage, as on Docker. That stage also confines them
	// (spawn.RlimitConfineArg): kiln's seccomp filter, as natively (the
	// Pod's profile is the runtime's default, which allows what kiln's
	// refuses), and a priority below the agent's.
	cfg, _ := json.Marshal(podConfig{
		Unisolated: agent.Unisolated{Workspace: "/workspace", Env: append(baseEnv(), env...), OpenFiles: lim.OpenFiles, FileSize: lim.FileSizeBytes, Confine: true},
		APIServer:  b.apiServer,
	})
	yes, no := true, false
	linkCPU := linkMillis(lim.CPUMillis)
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(lim.CPUMillis-linkCPU, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(lim.MemoryBytes, resource.BinarySI),
	}
	linkRes := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(linkCPU, resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse(linkMemory),
	}
	for name, n := range extended {
		res[corev1.ResourceName(name)] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	memDir := func(size int64) corev1.VolumeSource {
		return corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(size, resource.BinarySI)}}
	}
	vols := []corev1.Volume{
		{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: resource.NewQuantity(lim.WorkspaceBytes, resource.BinarySI)}}},
		{Name: "tmp", VolumeSource: memDir(lim.TmpBytes)},
		{Name: "shm", VolumeSource: memDir(lim.TmpBytes)},
	}
	if claim != "" {
		vols[0].VolumeSource = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}
	}
	mounts := []corev1.VolumeMount{{Name: "workspace", MountPath: "/workspace"}, {Name: "tmp", MountPath: "/tmp"}, {Name: "shm", MountPath: "/dev/shm"}}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kiln-" + id, Labels: b.labels(id)},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			Hostname:                      "kiln",
			TerminationGracePeriodSeconds: new(int64(1)),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: &yes,
				RunAsUser:    &uid,
				RunAsGroup:   &uid,
				FSGroup:      &uid,
				// a kept workspace is the sandbox user's already: no chown
				// of every file on each new Pod
				FSGroupChangePolicy: new(corev1.FSGroupChangeOnRootMismatch),
				SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Volumes: vols,
			Containers: []corev1.Container{{
				Name:            "sandbox",
				Image:           b.opt.Image,
				ImagePullPolicy: b.opt.PullPolicy,
				Command:         []string{"/kiln", AgentArg, string(cfg)},
				WorkingDir:      "/workspace",
				Resources:       corev1.ResourceRequirements{Requests: res, Limits: res},
				VolumeMounts:    mounts,
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot:             &yes,
					AllowPrivilegeEscalation: &no,
					ReadOnlyRootFilesystem:   &yes,
					Privileged:               &no,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}, {
				// The bridges' container (agent_linux.go): another uid,
				// another pid namespace, nothing mounted but the image.
				Name:            "link",
				Image:           b.opt.Image,
				ImagePullPolicy: b.opt.PullPolicy,
				Command:         []string{"/kiln", LinkArg},
				Resources:       corev1.ResourceRequirements{Requests: linkRes, Limits: linkRes},
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot:             &yes,
					RunAsUser:                &link,
					RunAsGroup:               &link,
					AllowPrivilegeEscalation: &no,
					ReadOnlyRootFilesystem:   &yes,
					Privileged:               &no,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	if b.opt.RuntimeClassName != "" {
		p.Spec.RuntimeClassName = &b.opt.RuntimeClassName
	}
	return p
}

// reach polls the Pod until kiln reaches its agent, and returns the
// client. It dials as soon as a node has the Pod, not once its status
// says it runs: the kubelet reports that at a relist of its containers
// (every second), and an exec into a container that has not started
// fails at once, so early dials only cost a round trip each.
func (b *Backend) reach(ctx context.Context, id string, extended map[string]int64) (_ *agentclient.Client, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	type dialed struct {
		c   *agentclient.Client
		err error
	}
	var inflight chan dialed // the dial under way, or nil
	defer func() {
		if inflight != nil { // given up: cancel drops it; close what it made
			go func(ch chan dialed) {
				if d := <-ch; d.c != nil {
					d.c.Close()
				}
			}(inflight)
		}
	}()
	why := "" // the last reason it was not reached, for the timeout's error
	for {
		p, err := b.cs.CoreV1().Pods(b.opt.Namespace).Get(ctx, "kiln-"+id, metav1.GetOptions{})
		if err != nil {
			return nil, kiln.Wrap(kiln.SandboxError, err, "the sandbox's Pod did not start")
		}
		if err := b.startProblem(p, extended, &why); err != nil {
			return nil, err
		}
		if inflight == nil && p.Spec.NodeName != "" {
			inflight = make(chan dialed, 1)
			go func(ch chan dialed) {
				c, err := b.dial(ctx, id)
				ch <- dialed{c, err}
			}(inflight)
		}
		for tick := time.After(50 * time.Millisecond); tick != nil; {
			select {
			case d := <-inflight:
				inflight = nil // the next is dialled after the tick
				if d.err == nil {
					return d.c, nil
				}
				// Running, the containers had started: the dial's error
				// is the answer. So is the agent's own refusal.
				if p.Status.Phase == corev1.PodRunning || errors.Is(d.err, agentclient.ErrRefused) {
					return nil, d.err
				}
				why = "(" + kiln.Message(d.err) + ")"
			case <-ctx.Done():
				return nil, kiln.Wrap(kiln.SandboxError, ctx.Err(), "the sandbox's Pod did not start %s", why)
			case <-tick:
				tick = nil
			}
		}
	}
}

// startProblem is why Pod p will not start, or nil while it may still;
// why is set to what it waits for. A Pod that no node can take for want
// of an extended resource it asked for fails at once: GPUs are few and
// held for a session's life, so waiting the 2 minutes for one to be
// freed would mostly hang the client for nothing.
func (b *Backend) startProblem(p *corev1.Pod, extended map[string]int64, why *string) error {
	switch p.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return kiln.Errorf(kiln.SandboxError, "the sandbox's Pod ended before it ran the agent: %s %s", p.Status.Reason, p.Status.Message)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImageNeverPull" || w.Reason == "CreateContainerConfigError" || w.Reason == "CreateContainerError") {
			return kiln.Errorf(kiln.SandboxError, "the sandbox's Pod cannot start: %s: %s", w.Reason, w.Message)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse {
			continue
		}
		*why = c.Reason + ": " + c.Message // e.g. Insufficient cpu
		if name := lacking(c.Message, extended); c.Reason == corev1.PodReasonUnschedulable && name != "" {
			return kiln.Errorf(kiln.Unavailable, "no node has %d %s free for the sandbox (the scheduler: %s); try again later or ask for fewer", extended[name], name, c.Message)
		}
		// Pre-made volumes (no provisioner) all taken: none will
		// come by waiting. (A provisioner's class never says this.)
		if c.Reason == corev1.PodReasonUnschedulable && strings.Contains(c.Message, "didn't find available persistent volumes to bind") {
			return kiln.Errorf(kiln.Unavailable, "no PersistentVolume is free for the session's workspace (storage class %q; the scheduler: %s): its administrator must add volumes or use a class with a provisioner", b.opt.StorageClass, c.Message)
		}
	}
	return nil
}

// lacking is the extended resource among those asked for that the
// scheduler's message says no node has enough of ("0/1 nodes are
// available: 1 Insufficient nvidia.com/gpu."), or "".
func lacking(msg string, extended map[string]int64) string {
	for name := range extended {
		// whole names only: nvidia.com/gpu is not nvidia.com/gpu-mem
		for _, end := range []string{".", ",", ";", ""} {
			if end == "" && strings.HasSuffix(msg, "Insufficient "+name) || end != "" && strings.Contains(msg, "Insufficient "+name+end) {
				return name
			}
		}
	}
	return ""
}

// exec starts argv in the Pod's link container with its stdin and stdout as the returned
// connection. The stream lives until Close.
func (b *Backend) exec(id string, argv []string) (*execConn, error) {
	req := b.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(b.opt.Namespace).Name("kiln-"+id).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "link", Command: argv, Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewWebSocketExecutor(b.cfg, "GET", req.URL().String())
	if err != nil {
		return nil, kiln.Wrap(kiln.SandboxError, err, "cannot open an exec stream to the Pod")
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	c := &execConn{in: inW, out: outR, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: &c.errBuf})
		if err == nil {
			err = io.EOF
		}
		outW.CloseWithError(err)
		inR.CloseWithError(err)
	}()
	return c, nil
}

// baseEnv is the Docker backend's: the same image and paths.
func baseEnv() []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/go/bin",
		"HOME=/workspace", "USER=user", "LOGNAME=user", "LANG=C.UTF-8", "LC_ALL=C.UTF-8",
		"TMPDIR=/tmp", "XDG_CACHE_HOME=/tmp/.cache", "TERM=dumb", "SHELL=/bin/bash",
	}
}

// Connect returns the client of the sandbox's agent: the one this
// backend holds, else a new connection, which takes the sandbox from the
// kiln replica that held it (SharedSandboxes). A Pod reached so becomes
// this backend's: its owner label is set to this owner's, so that the
// replica that made it does not reap it when it restarts.
func (b *Backend) Connect(ctx context.Context, id string) (*agentclient.Client, error) {
	b.mu.Lock()
	c := b.conns[id]
	b.mu.Unlock()
	if c != nil {
		return c, nil
	}
	if err := b.adopt(ctx, id); err != nil {
		return nil, err
	}
	c, err := b.dial(ctx, id)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if prev := b.conns[id]; prev != nil { // a concurrent Connect won
		go c.Close()
		return prev, nil
	}
	b.conns[id] = c
	return c, nil
}

// adopt checks that id is a running sandbox Pod of kiln's in the
// namespace and gives it this backend's owner label.
func (b *Backend) adopt(ctx context.Context, id string) error {
	if !validID(id) {
		return kiln.Errorf(kiln.NotFound, "no sandbox %q", id)
	}
	pods := b.cs.CoreV1().Pods(b.opt.Namespace)
	p, err := pods.Get(ctx, "kiln-"+id, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return kiln.Errorf(kiln.NotFound, "no sandbox %q: its Pod is gone", id)
	case err != nil:
		return kiln.Wrap(kiln.SandboxError, err, "cannot look up the sandbox's Pod")
	case p.Labels[labelManaged] != "kiln" || p.Labels[labelBackend] != "kubernetes" || p.Labels[labelSandbox] != id:
		return kiln.Errorf(kiln.NotFound, "no sandbox %q: Pod %s is not a kiln sandbox", id, p.Name)
	case p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning:
		return kiln.Errorf(kiln.NotFound, "no sandbox %q: its Pod is %s", id, p.Status.Phase)
	case p.Labels[labelOwner] == b.owner && p.Labels[labelReplica] == b.replica:
		return nil
	}
	labels := map[string]any{labelOwner: b.owner, labelReplica: b.replica}
	for k, v := range labels {
		if v == "" {
			labels[k] = nil // a merge patch's null removes the label
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if _, err := pods.Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return kiln.Wrap(kiln.SandboxError, err, "cannot label the sandbox's Pod as this kiln's")
	}
	return nil
}

// validID says whether id is one newID makes: it becomes part of a Pod's
// name.
func validID(id string) bool {
	if len(id) != 16 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}

// Disconnect closes this backend's connection to the sandbox and leaves
// the sandbox running, for the replica it was handed to.
func (b *Backend) Disconnect(id string) {
	b.mu.Lock()
	c := b.conns[id]
	delete(b.conns, id)
	b.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// SharedSandboxes: any replica's backend reaches any sandbox (Connect).
func (b *Backend) SharedSandboxes() bool { return true }

// DestroySandbox deletes the Pod (and so its emptyDir workspace); one
// that is gone is not an error.
func (b *Backend) DestroySandbox(ctx context.Context, id string) error {
	b.mu.Lock()
	c := b.conns[id]
	delete(b.conns, id)
	b.mu.Unlock()
	// The Pod goes first: its end ends the exec stream cleanly, where
	// closing the stream first leaves the agent to notice.
	err := b.remove(ctx, id)
	if c != nil {
		c.Close()
	}
	return err
}

func (b *Backend) remove(ctx context.Context, id string) error {
	grace := int64(0)
	err := b.cs.CoreV1().Pods(b.opt.Namespace).Delete(ctx, "kiln-"+id, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if err != nil && !apierrors.IsNotFound(err) {
		return kiln.Wrap(kiln.SandboxError, err, "cannot delete the Pod")
	}
	return nil
}

// List returns the sandboxes whose Pods exist and are not being deleted,
// found by label: kiln's and, with an owner set, this owner's only; not
// the warm pool's Pods, which are no sandbox yet.
func (b *Backend) List(ctx context.Context) ([]string, error) {
	res, err := b.cs.CoreV1().Pods(b.opt.Namespace).List(ctx, metav1.ListOptions{LabelSelector: b.selector()})
	if err != nil {
		return nil, kiln.Wrap(kiln.SandboxError, err, "cannot list Pods")
	}
	var ids []string
	for _, p := range res.Items {
		if id := p.Labels[labelSandbox]; id != "" && p.DeletionTimestamp == nil && !b.thePool().has(id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Probe connects with the kubeconfig at path ("" for the in-cluster
// config) and returns the API server's version and how many nodes are
// Ready, for kiln doctor.
func Probe(ctx context.Context, kubeconfig string) (version string, ready int, err error) {
	var cfg *rest.Config
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return "", 0, err
	}
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", 0, err
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return "", 0, err
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return v.GitVersion, 0, err
	}
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return v.GitVersion, ready, nil
}

// Capabilities: isolation by the Pod (the Docker backend's container,
// plus a default-deny NetworkPolicy). Limits are enforced by the Pod's
// cgroup but not reported per execution, as with Docker.
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Name: "kubernetes", Isolation: true}
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// execConn is the exec stream as the agent client's connection.
type execConn struct {
	in     *io.PipeWriter
	out    *io.PipeReader
	cancel context.CancelFunc
	done   chan struct{} // the stream ended
	errBuf limitedBuffer
}

func (c *execConn) Read(p []byte) (int, error)  { return c.out.Read(p) }
func (c *execConn) Write(p []byte) (int, error) { return c.in.Write(p) }

// Close ends the agent's stdin, which is how it learns to stop, and
// gives the stream a moment to end by itself before cutting it (cut at
// once, client-go logs errors about the closed connection).
func (c *execConn) Close() error {
	c.in.Close()
	select {
	case <-c.done:
	case <-time.After(2 * time.Second):
	}
	c.cancel()
	c.out.Close()
	return nil
}

func (c *execConn) stderr() string { return c.errBuf.String() }

// limitedBuffer keeps the first 8 KiB written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := 8<<10 - len(l.buf); room > 0 {
		l.buf = append(l.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}
