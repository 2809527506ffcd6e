package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mptester/mptester/agent/caps"
	"github.com/mptester/mptester/collect/api"
)

// Argv builds the measuring command's arguments from a checked task: only
// typed parameters become flags, every file the command reads or writes is
// the agent's own (in dir, the state directory), and the result goes to
// the spool (--no-upload). remaining is each budgeted path's bytes left
// this month (a survey stops at it).
func Argv(t api.Task, c caps.Caps, dir string, remaining map[string]int64) ([]string, error) {
	args := []string{t.Type}
	add := func(flag string, v any) { args = append(args, "--"+flag, fmt.Sprint(v)) }
	dur := func(flag string, d api.Duration) {
		if d != 0 {
			add(flag, time.Duration(d))
		}
	}
	list := func(flag string, l []string) {
		if len(l) > 0 {
			add(flag, strings.Join(l, ","))
		}
	}
	paths := t.Paths()
	if len(paths) == 0 {
		paths = c.Paths // the owner's paths when the task names none
	}
	switch t.Type {
	case api.TypeSurvey:
		p := t.Survey
		if p == nil {
			p = &api.SurveyParams{}
		}
		switch {
		case len(p.Domains) > 0:
			file, err := writeList(dir, t.Name, p.Domains)
			if err != nil {
				return nil, err
			}
			add("list", file)
			if p.Top == 0 {
				add("top", len(p.Domains))
			}
		case p.ListID != "":
			add("list-id", p.ListID)
			add("cache-dir", filepath.Join(dir, "cache"))
		}
		if p.Top > 0 {
			add("top", p.Top)
		}
		if len(p.Paths) == 0 {
			list("paths", paths)
		} else {
			list("paths", p.Paths)
		}
		if p.Family != "" {
			add("family", p.Family)
		}
		if p.Method != "" {
			add("method", p.Method)
		}
		if p.Port > 0 {
			add("port", p.Port)
		}
		if p.Count > 0 {
			add("count", p.Count)
		}
		dur("timeout", p.Timeout)
		dur("spacing", p.Spacing)
		if p.Rate > 0 {
			add("rate", strconv.FormatFloat(p.Rate, 'g', -1, 64))
		} else if c.MaxRate > 0 {
			add("rate", strconv.FormatFloat(min(c.MaxRate, 100), 'g', -1, 64)) // the command's default, within the cap
		}
		dur("dns-timeout", p.DNSTimeout)
		if p.DNSRetries != nil {
			add("dns-retries", *p.DNSRetries)
		}
		if !c.AllowPrivate {
			args = append(args, "--no-private")
		}
		for _, name := range sortedKeys(remaining) {
			add("max-bytes", name+"="+strconv.FormatInt(max(remaining[name], 0), 10))
		}
	case api.TypeRun:
		p := t.Run
		list("server", p.Servers)
		for _, tr := range sortedKeys(p.Ports) {
			add(tr+"-port", p.Ports[tr])
		}
		if p.QUICAltPort != nil {
			add("quic-alt-port", *p.QUICAltPort)
		}
		list("patterns", p.Patterns)
		list("transports", p.Transports)
		if len(p.Paths) == 0 {
			list("paths", paths)
		} else {
			list("paths", p.Paths)
		}
		list("backup", p.Backup)
		if p.Family != "" {
			add("family", p.Family)
		}
		if p.Pin != "" {
			add("pin", p.Pin)
		}
		if p.Insecure {
			args = append(args, "--insecure")
		}
		if p.ServerName != "" {
			add("server-name", p.ServerName)
		}
		if p.HTTP1 {
			args = append(args, "--http1")
		}
		if p.Mode != "" {
			add("mode", p.Mode)
		}
		if p.Size > 0 {
			add("size", p.Size)
		}
		dur("duration", p.Duration)
		if p.ChunkSize > 0 {
			add("chunk-size", p.ChunkSize)
		}
		dur("interval", p.Interval)
		if p.PingCount > 0 {
			add("ping-count", p.PingCount)
		}
		if p.IperfDirection != "" {
			add("iperf-direction", p.IperfDirection)
		}
		if p.Pace != nil {
			args = append(args, "--pace="+time.Duration(*p.Pace).String())
		}
		dur("timeout", p.Timeout)
		dur("connect-timeout", p.ConnectTimeout)
		if p.Seed != 0 {
			add("seed", p.Seed)
		}
		if p.Stable != nil {
			args = append(args, "--stable="+strconv.FormatBool(*p.Stable))
		}
		// Capturing needs CAP_NET_RAW, which the shipped unit grants; the
		// 100 ms samples are the fallback.
		if p.Capture != nil {
			args = append(args, "--capture="+strconv.FormatBool(*p.Capture))
		}
		dur("grace", p.Grace)
		if !c.AllowPrivate {
			// Checked again at each dial, after each path's own lookup: the
			// agent's check before the run cannot see a rebinding name.
			args = append(args, "--no-private")
			for _, pf := range c.Public {
				add("public-prefix", pf)
			}
		}
	default:
		return nil, fmt.Errorf("task %s: unknown type %q", t.Name, t.Type)
	}
	return append(args, "--no-upload"), nil
}

// writeList writes a task's domains as the survey's list (rank,domain) in
// the agent's state directory.
func writeList(dir, task string, domains []string) (string, error) {
	d := filepath.Join(dir, "lists")
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", err
	}
	var sb strings.Builder
	for i, name := range domains {
		fmt.Fprintf(&sb, "%d,%s\n", i+1, name)
	}
	// The name is checked by the schema: no separators, no dot first.
	file := filepath.Join(d, task+".csv")
	return file, os.WriteFile(file, []byte(sb.String()), 0o600)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
