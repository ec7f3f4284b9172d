package main

import (
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/kiln-dev/kiln/client"
	"github.com/kiln-dev/kiln/internal/kiln"
)

// Flag types of the remote commands. Each Set error says what is allowed,
// and flag prints it with the usage.

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	if v == "" {
		return fmt.Errorf("the value is empty")
	}
	*l = append(*l, v)
	return nil
}

// metaFlag collects repeated KEY=VALUE pairs.
type metaFlag map[string]string

func (m metaFlag) String() string {
	if len(m) == 0 {
		return ""
	}
	return pairs(m)
}

func (m metaFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not KEY=VALUE", v)
	}
	m[k] = val
	return nil
}

// choiceFlag is a string that must be one of a few values.
type choiceFlag struct {
	v       *string
	allowed []string
}

func (c choiceFlag) String() string {
	if c.v == nil {
		return ""
	}
	return *c.v
}

func (c choiceFlag) Set(v string) error {
	if !slices.Contains(c.allowed, v) {
		return fmt.Errorf("%q is not one of %s", v, strings.Join(c.allowed, ", "))
	}
	*c.v = v
	return nil
}

// limitFlags are the limit flags of session create, with the server's
// defaults (not this host's) when absent.
type limitFlags struct {
	lim  kiln.Limits
	cpus float64
}

func (l *limitFlags) add(fs *flag.FlagSet) {
	fs.Var(durationFlag{&l.lim.Timeout}, "timeout", "wall-clock limit per cell, e.g. 10s (default: the server's)")
	fs.Var(sizeFlag{&l.lim.MemoryBytes}, "memory", "memory limit, e.g. 256M (default: the server's)")
	fs.Var(sizeFlag{&l.lim.OutputBytes}, "output", "stdout+stderr limit per cell, e.g. 64K (default: the server's)")
	fs.Int64Var(&l.lim.Pids, "pids", 0, "process and thread limit (default: the server's)")
	fs.Float64Var(&l.cpus, "cpus", 0, "CPU limit in CPUs, e.g. 0.5 (default: the server's)")
}

// limits are the flags as the API's limits; the server checks the ranges.
func (l *limitFlags) limits() (client.Limits, error) {
	if err := applyCPUs(&l.lim, l.cpus); err != nil {
		return client.Limits{}, err
	}
	return client.Limits{
		TimeoutMS:   millis(l.lim.Timeout),
		MemoryBytes: l.lim.MemoryBytes,
		Pids:        l.lim.Pids,
		CPUMillis:   l.lim.CPUMillis,
		OutputBytes: l.lim.OutputBytes,
	}, nil
}

// millis rounds up, so that a positive duration never becomes 0, which
// would mean "the default".
func millis(d time.Duration) int64 {
	return int64(math.Ceil(float64(d) / float64(time.Millisecond)))
}
