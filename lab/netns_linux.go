package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mptester/mptester/internal/netns"
)

// run runs a command (normally ip) and returns an error carrying its output.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// ipBatch runs many ip commands in one process (ip -batch), much faster
// than one exec each. ns selects the namespace ("" = host). Lines starting
// with "-6 " run in a second batch with -6 (ip rule needs the family).
func ipBatch(ctx context.Context, ns string, lines []string) error {
	var l4, l6 []string
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l, "-6 "); ok {
			l6 = append(l6, rest)
		} else {
			l4 = append(l4, l)
		}
	}
	for _, b := range []struct {
		fam   string
		lines []string
	}{{"", l4}, {"-6", l6}} {
		if len(b.lines) == 0 {
			continue
		}
		var args []string
		if ns != "" {
			args = append(args, "-n", ns)
		}
		if b.fam != "" {
			args = append(args, b.fam)
		}
		cmd := exec.CommandContext(ctx, "ip", append(args, "-batch", "-")...)
		cmd.Stdin = strings.NewReader(strings.Join(b.lines, "\n") + "\n")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s -batch: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// nsExists reports whether /run/netns/name exists.
func nsExists(name string) bool {
	_, err := os.Stat("/run/netns/" + name)
	return err == nil
}

// InNS runs fn on an OS thread locked in network namespace ns
// (netns.Do): sockets fn creates belong to ns for their whole life.
func InNS(ns string, fn func() error) error { return netns.Do(ns, fn) }

// nsPIDs lists the processes whose network namespace is ns (except us).
func nsPIDs(ns string) []int {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killWait sends SIGTERM, then SIGKILL after grace, to pids and waits
// until they are gone (or 3 s more have passed).
func killWait(pids []int, grace time.Duration) {
	if len(pids) == 0 {
		return
	}
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGTERM)
	}
	alive := func() []int {
		var a []int
		for _, p := range pids {
			if syscall.Kill(p, 0) == nil && !isZombie(p) {
				a = append(a, p)
			}
		}
		return a
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) && len(alive()) > 0 {
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range alive() {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	deadline = time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && len(alive()) > 0 {
		time.Sleep(20 * time.Millisecond)
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// state is the field after "(comm)".
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}

// daemonPID returns the pid recorded in pidFile if that process is alive
// and is an mptester lab process.
func daemonPID(pidFile string) (int, bool) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 || pid == os.Getpid() {
		return 0, false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || isZombie(pid) {
		return 0, false
	}
	// Only kill what is recognisably a lab daemon, never a recycled pid.
	if !bytes.Contains(cmdline, []byte("lab\x00daemon")) {
		return 0, false
	}
	return pid, true
}

// CleanStale removes what a crashed or still running lab of the same name
// left: its daemon process, processes in its namespaces, the namespaces,
// and TUN devices stranded in the host namespace. Safe to call when
// nothing is there.
func CleanStale(ctx context.Context, name, dir string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	if dir == "" {
		dir = DefaultDir(name)
	}
	files := FilesIn(dir)
	if pid, ok := daemonPID(files.PID); ok {
		killWait([]int{pid}, 5*time.Second)
	}
	var errs []error
	for _, ns := range []string{ClientNS(name), InternetNS(name)} {
		if !nsExists(ns) {
			continue
		}
		killWait(nsPIDs(ns), 2*time.Second)
		if err := run(ctx, "ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	for i := range PathNames {
		for _, side := range []byte{'c', 'i'} {
			dev := tmpTUN(name, i, side)
			if _, err := os.Stat("/sys/class/net/" + dev); err == nil {
				if err := run(ctx, "ip", "link", "del", dev); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if err := os.RemoveAll(netnsEtc(ClientNS(name))); err != nil {
		errs = append(errs, err)
	}
	for _, f := range []string{files.Control, files.PID, files.LabJSON} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Leftovers lists what of lab name still exists: namespaces, TUN devices
// in the host namespace, a daemon process. Empty means clean.
func Leftovers(name, dir string) []string {
	var left []string
	for _, ns := range []string{ClientNS(name), InternetNS(name)} {
		if nsExists(ns) {
			left = append(left, "netns "+ns)
		}
	}
	for i := range PathNames {
		for _, side := range []byte{'c', 'i'} {
			dev := tmpTUN(name, i, side)
			if _, err := os.Stat("/sys/class/net/" + dev); err == nil {
				left = append(left, "link "+dev)
			}
		}
	}
	if _, err := os.Stat(netnsEtc(ClientNS(name))); err == nil {
		left = append(left, "dir "+netnsEtc(ClientNS(name)))
	}
	if dir == "" {
		dir = DefaultDir(name)
	}
	if pid, ok := daemonPID(FilesIn(dir).PID); ok {
		left = append(left, "process "+strconv.Itoa(pid))
	}
	if _, err := os.Stat(FilesIn(dir).Control); err == nil {
		left = append(left, "socket "+FilesIn(dir).Control)
	}
	return left
}

// DaemonPID returns the pid of the lab daemon recorded in dir, if it runs.
func DaemonPID(dir string) (int, bool) { return daemonPID(FilesIn(dir).PID) }

// WaitExit waits up to d for process pid to exit (or become a zombie),
// then kills it. It reports whether the process exited by itself.
func WaitExit(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil || isZombie(pid) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	killWait([]int{pid}, time.Second)
	return false
}
