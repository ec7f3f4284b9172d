// Package doctor tells, in plain words, what this host offers for sandboxes
// and what it lacks.
package doctor

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/kiln-dev/kiln/internal/backend/docker"
	"github.com/kiln-dev/kiln/internal/backend/native"
	"github.com/kiln-dev/kiln/internal/lang"
)

// Report writes the report to w and returns the verdict: nil when this host
// can run sandboxes securely.
func Report(ctx context.Context, w io.Writer) error {
	p := native.ProbeHost()
	fmt.Fprintln(w, "kiln doctor: what this host offers for sandboxes")
	fmt.Fprintln(w)
	line := func(ok bool, format string, args ...any) {
		mark := "ok     "
		if !ok {
			mark = "MISSING"
		}
		fmt.Fprintf(w, "  %s  %s\n", mark, fmt.Sprintf(format, args...))
	}
	line(p.Root, "running as root (needed to give each sandbox its own host uid range and cgroup)")
	line(p.Seccomp, "seccomp filters for %s%s", p.Arch, reason(p.SeccompWhy, p.Seccomp))
	var have, lack []string
	for ns, ok := range p.Namespaces {
		if ok {
			have = append(have, ns)
		} else {
			lack = append(lack, ns)
		}
	}
	sort.Strings(have)
	sort.Strings(lack)
	line(len(lack) == 0, "namespaces: %s%s", strings.Join(have, " "), missing(lack))
	line(p.MaxUserNS != 0, "user namespaces: up to %d per user (user.max_user_namespaces)", p.MaxUserNS)
	if p.CgroupsErr != nil {
		line(false, "cgroups: %v", p.CgroupsErr)
	} else {
		line(true, "cgroups: %s", p.Cgroups)
	}
	if p.LandlockABI >= native.LandlockFull {
		line(true, "Landlock ABI %d (applied to every user process)", p.LandlockABI)
	} else if p.LandlockABI > 0 {
		fmt.Fprintf(w, "  partial  Landlock ABI %d: applied as far as this kernel allows; ABI %d (Linux 6.12) adds device ioctl rules and signal scoping\n", p.LandlockABI, native.LandlockFull)
	} else {
		fmt.Fprintln(w, "  absent   Landlock: this kernel has none; sandboxes rely on the read-only root and seccomp")
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Kernel settings that widen what code can reach:")
	for _, s := range p.Sysctls {
		switch {
		case s.Value == "":
			fmt.Fprintf(w, "  n/a      %s (not on this kernel)\n", s.Name)
		case s.Risky:
			fmt.Fprintf(w, "  risky    %s = %s: %s\n", s.Name, s.Value, s.Note)
		default:
			fmt.Fprintf(w, "  ok       %s = %s\n", s.Name, s.Value)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Language runtimes (as the sandbox sees them):")
	for _, l := range lang.All() {
		v, err := l.DetectVersion(ctx)
		if err != nil {
			fmt.Fprintf(w, "  MISSING  %-11s %v\n", l.Name, err)
			continue
		}
		fmt.Fprintf(w, "  ok       %-11s %-24s %s\n", l.Name, v, l.Binary)
	}
	dockerReport(ctx, w)
	kubernetesReport(ctx, w)
	fmt.Fprintln(w)
	verdict := p.Verdict()
	if verdict != nil {
		fmt.Fprintf(w, "Verdict: kiln cannot run sandboxes here. %v\n", verdict)
		return verdict
	}
	fmt.Fprintln(w, "Verdict: this host can run kiln sandboxes.")
	return nil
}

func reason(why string, ok bool) string {
	if ok || why == "" {
		return ""
	}
	return ": " + why
}

func missing(lack []string) string {
	if len(lack) == 0 {
		return ""
	}
	return "; missing: " + strings.Join(lack, " ")
}

// dockerReport says whether the Docker backend (--backend docker) can be
// used here and which runtimes its engine has. It does not change the
// verdict, which is the default native backend's.
func dockerReport(ctx context.Context, w io.Writer) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The Docker backend (--backend docker):")
	e := docker.Probe(ctx)
	if e.Err != nil {
		fmt.Fprintf(w, "  absent   Docker engine: %v\n", e.Err)
		return
	}
	fmt.Fprintf(w, "  ok       Docker engine %s: runtimes %s (default %s)\n", e.Version, strings.Join(e.Runtimes, " "), e.DefaultRuntime)
	gvisorReport(ctx, w, e)
}
