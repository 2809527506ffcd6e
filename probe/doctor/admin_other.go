//go:build !linux && !windows

package doctor

// privileges: raw sockets on BSD and macOS need root.
func privileges(env *Env) Check {
	c := Check{ID: "privileges", Title: "Raw sockets (root)"}
	if *env.Euid == 0 {
		c.Status, c.Detail = StatusOK, "running as root"
		return c
	}
	c.Status = StatusWarn
	c.Detail = "not root: ICMP and raw probes fall back to unprivileged sockets or are skipped"
	c.Fix = "sudo " + env.Executable + " doctor"
	return c
}
