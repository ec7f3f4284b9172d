package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"

	"github.com/kiln-dev/kiln/internal/kiln"
)

// sizeValue is a flag of bytes written as 512M, 1G or 65536.
type sizeValue struct{ p *int64 }

func (v sizeValue) String() string {
	if v.p == nil || *v.p == 0 {
		return ""
	}
	return kiln.FormatBytes(*v.p)
}

func (v sizeValue) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}

// cpusValue is a CPU limit written in CPUs (0.5, 2) and kept in
// millicpus.
type cpusValue struct{ p *int64 }

func (v cpusValue) String() string {
	if v.p == nil || *v.p == 0 {
		return ""
	}
	return strconv.FormatFloat(float64(*v.p)/1000, 'f', -1, 64)
}

func (v cpusValue) Set(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || f < 0.05 || f > 64 {
		return fmt.Errorf("%q is not a CPU count from 0.05 to 64", s)
	}
	*v.p = int64(math.Round(f * 1000))
	return nil
}

// addSessionLimitFlags defines --default-X and --max-X for the per-session
// limits an operator sets: memory, CPUs, pids, cell timeout and disk (the
// workspace). Zero leaves kiln's own default and range.
func addSessionLimitFlags(fs *flag.FlagSet, def, max *kiln.Limits) {
	for _, l := range []struct {
		prefix, what string
		lim          *kiln.Limits
	}{{"default", "a session or run gets when it asks for none", def}, {"max", "a non-admin may ask for (admins may exceed it)", max}} {
		fs.Var(sizeValue{&l.lim.MemoryBytes}, l.prefix+"-memory", "memory (a `size`: 512M, 1G) "+l.what)
		fs.Var(cpusValue{&l.lim.CPUMillis}, l.prefix+"-cpus", "`CPUs` (0.5, 2) "+l.what)
		fs.Int64Var(&l.lim.Pids, l.prefix+"-pids", 0, "processes and threads "+l.what)
		fs.DurationVar(&l.lim.Timeout, l.prefix+"-timeout", 0, "cell timeout (30s, 5m) "+l.what)
		fs.Var(sizeValue{&l.lim.WorkspaceBytes}, l.prefix+"-disk", "workspace disk (a `size`: 2G) "+l.what)
	}
}

// maxConfigBytes bounds the config file: it is a short list of settings.
const maxConfigBytes = 1 << 20

// applyConfigFile sets, from a JSON object whose keys are the flags' names
// without dashes ({"max-memory": "4G", "pool": 2}), every flag that the
// command line did not set: the command line wins.
func applyConfigFile(fs *flag.FlagSet, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return kiln.Wrap(kiln.Invalid, err, "cannot read the config file %s", path)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return kiln.Wrap(kiln.Invalid, err, "cannot read the config file %s", path)
	}
	if len(data) > maxConfigBytes {
		return kiln.Errorf(kiln.Invalid, "the config file %s is over %s", path, kiln.FormatBytes(maxConfigBytes))
	}
	var settings map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&settings); err != nil {
		return kiln.Errorf(kiln.Invalid, "the config file %s is not a JSON object of settings like {\"max-memory\": \"4G\"}: %v", path, err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	names := make([]string, 0, len(settings))
	for name := range settings {
		names = append(names, name)
	}
	sort.Strings(names) // the first error is the same on every run
	for _, name := range names {
		if name == "config" || fs.Lookup(name) == nil {
			return kiln.Errorf(kiln.Invalid, "the config file %s: unknown setting %q; the settings are kiln serve's flags without the dashes (kiln serve -h)", path, truncName(name, 60))
		}
		if set[name] {
			continue
		}
		// A structured setting (environments) takes its JSON as it is.
		if j, ok := fs.Lookup(name).Value.(interface{ SetJSON(json.RawMessage) error }); ok {
			if err := j.SetJSON(settings[name]); err != nil {
				return kiln.Errorf(kiln.Invalid, "the config file %s: %q: %v", path, name, err)
			}
			continue
		}
		value, err := settingText(settings[name])
		if err != nil {
			return kiln.Errorf(kiln.Invalid, "the config file %s: %q must be a string, a number or true/false", path, name)
		}
		if err := fs.Set(name, value); err != nil {
			return kiln.Errorf(kiln.Invalid, "the config file %s: %q: %v", path, name, err)
		}
	}
	return nil
}

// settingText is a JSON scalar as the flag's text.
func settingText(raw json.RawMessage) (string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case bool:
		return strconv.FormatBool(v), nil
	case float64:
		return string(bytes.TrimSpace(raw)), nil
	}
	return "", fmt.Errorf("not a scalar")
}

func truncName(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
