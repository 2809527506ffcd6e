package doctor

import "golang.org/x/sys/windows"

// privileges: raw ICMP sockets on Windows need an elevated process.
func privileges(_ *Env) Check {
	c := Check{ID: "privileges", Title: "Raw sockets (Administrator)"}
	if windows.GetCurrentProcessToken().IsElevated() {
		c.Status, c.Detail = StatusOK, "running elevated"
		return c
	}
	c.Status = StatusWarn
	c.Detail = "not elevated: ICMP and raw probes are skipped"
	c.Fix = `Start-Process mptester -Verb RunAs`
	return c
}
