package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// Workspace kinds (Options.Workspace).
const (
	WorkspaceEmptyDir = "emptydir" // the Pod's own: it dies with the Pod
	WorkspacePVC      = "pvc"      // a PersistentVolumeClaim per workspace
)

// labelWorkspace marks a workspace's PVC; annotationHostDir names the
// service's workspace directory it stands for.
const (
	labelWorkspace    = "dev.kiln.workspace"
	annotationHostDir = "dev.kiln/host-dir"
)

// claimName is the PVC of the service's workspace directory hostDir: one
// per workspace, not per Pod, so that a new Pod for the same session (its
// Pod was deleted or evicted, or kiln restarted and reaped it) mounts the
// same files. The owner is in it: two kilns never share one.
func (b *Backend) claimName(hostDir string) string {
	sum := sha256.Sum256([]byte(b.owner + "\x00" + hostDir))
	return "kiln-ws-" + hex.EncodeToString(sum[:])[:32]
}

// ensureClaim makes the PVC of hostDir, sized by the session's workspace
// limit, unless it is there: then it is the session's, files and all.
func (b *Backend) ensureClaim(ctx context.Context, hostDir string, size int64) (string, error) {
	name := b.claimName(hostDir)
	pvcs := b.cs.CoreV1().PersistentVolumeClaims(b.opt.Namespace)
	l := map[string]string{labelManaged: "kiln", labelBackend: "kubernetes", labelWorkspace: name[len("kiln-ws-"):]}
	if b.owner != "" {
		l[labelOwner] = b.owner
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l, Annotations: map[string]string{annotationHostDir: hostDir}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)}},
		},
	}
	if b.opt.StorageClass != "" {
		pvc.Spec.StorageClassName = &b.opt.StorageClass
	}
	got, err := pvcs.Create(ctx, pvc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		if got, err = pvcs.Get(ctx, name, metav1.GetOptions{}); err == nil && got.DeletionTimestamp != nil {
			return "", kiln.Errorf(kiln.Unavailable, "the session's workspace volume %s is being deleted; try again in a moment", name)
		}
	}
	if err != nil {
		return "", kiln.Wrap(kiln.SandboxError, err, "cannot create the workspace's PersistentVolumeClaim")
	}
	return name, nil
}

// PruneWorkspaces deletes this kiln's workspace PVCs whose workspace
// directory the service has removed (the session ended), and returns how
// many. Only the service knows when a session ends; it removes the
// directory then, and a Pod's deletion (a broken sandbox is replaced on
// the same workspace) must not take the files. It runs on Reap and
// every minute (New).
func (b *Backend) PruneWorkspaces(ctx context.Context) (int, error) {
	sel := labelManaged + "=kiln," + labelBackend + "=kubernetes," + labelWorkspace
	if b.owner != "" {
		sel += "," + labelOwner + "=" + b.owner
	}
	pvcs := b.cs.CoreV1().PersistentVolumeClaims(b.opt.Namespace)
	list, err := pvcs.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return 0, kiln.Wrap(kiln.SandboxError, err, "cannot list the workspaces' PersistentVolumeClaims")
	}
	n := 0
	for _, pvc := range list.Items {
		dir := pvc.Annotations[annotationHostDir]
		if pvc.DeletionTimestamp != nil || dir == "" || pvc.Name != b.claimName(dir) {
			continue // not one this kiln made for that directory
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := pvcs.Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return n, kiln.Wrap(kiln.SandboxError, err, "cannot delete the workspace's PersistentVolumeClaim %s", pvc.Name)
		}
		n++
	}
	return n, nil
}
