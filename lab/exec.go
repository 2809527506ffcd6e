package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
)

// Environment `lab exec` gives commands.
const (
	EnvConfig = "MPTESTER_CONFIG"  // the lab's config.yaml (per-path DNS)
	EnvDir    = "MPTESTER_LAB_DIR" // the lab's state directory (lab.json)
	EnvSide   = "MPTESTER_LAB_SIDE"
)

// Namespace returns the namespace of side: "client" (default) or
// "server"/"internet".
func (i Info) Namespace(side string) (string, error) {
	switch side {
	case "", "client":
		return i.Namespaces.Client, nil
	case "server", "internet":
		return i.Namespaces.Internet, nil
	}
	return "", fmt.Errorf("unknown side %q (want client or server)", side)
}

// Command prepares argv to run in a namespace of the lab (ip netns exec),
// with MPTESTER_CONFIG pointing at the lab's config file.
func Command(ctx context.Context, i Info, side string, argv ...string) (*exec.Cmd, error) {
	ns, err := i.Namespace(side)
	if err != nil {
		return nil, err
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("no command")
	}
	// "mptester" means this very binary when none is on PATH.
	if argv[0] == "mptester" {
		if _, err := exec.LookPath("mptester"); err != nil {
			if self, err := os.Executable(); err == nil {
				argv = append([]string{self}, argv[1:]...)
			}
		}
	}
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, argv...)...)
	cmd.Env = append(os.Environ(), EnvConfig+"="+i.Files.Config, EnvDir+"="+i.Dir, EnvSide+"="+side)
	return cmd, nil
}
