// Command mptester probes every network path of a multihomed host.
package main

import (
	"os"

	"github.com/mptester/mptester/internal/cmd"
)

func main() { os.Exit(cmd.Main()) }
