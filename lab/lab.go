package lab

import (
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/netip"
	"path/filepath"
	"regexp"
	"time"

	"github.com/mptester/mptester/lab/emu"
	"github.com/mptester/mptester/lab/world"
	"github.com/mptester/mptester/probe"
)

// Paths of the lab, in preference order (wlan0 is the default route).
var PathNames = []string{"wlan0", "wwan0"}

// PathPlan is the fixed address plan of one access path (see the package
// doc comment).
type PathPlan struct {
	Name     string     `json:"name"`
	Router   string     `json:"router_iface"` // peer TUN in the Internet namespace
	Client4  netip.Addr `json:"client_ipv4"`
	Client6  netip.Addr `json:"client_ipv6"`
	Gateway4 netip.Addr `json:"gateway_ipv4"`
	Gateway6 netip.Addr `json:"gateway_ipv6"`
	Subnet4  string     `json:"subnet_ipv4"`
	Subnet6  string     `json:"subnet_ipv6"`
	Resolv4  netip.Addr `json:"resolver_ipv4"` // this path's DNS view
	Resolv6  netip.Addr `json:"resolver_ipv6"`
	Metric   int        `json:"metric"` // default route metric
	Table    int        `json:"table"`  // source-address policy table
}

// Plan returns the address plan of path name ("wlan0" or "wwan0").
func Plan(name string) (PathPlan, bool) {
	switch name {
	case "wlan0":
		return PathPlan{Name: "wlan0", Router: "r-wlan0",
			Client4: netip.MustParseAddr("198.18.1.2"), Client6: netip.MustParseAddr("fd00:1::2"),
			Gateway4: netip.MustParseAddr("198.18.1.1"), Gateway6: netip.MustParseAddr("fd00:1::1"),
			Subnet4: "198.18.1.0/24", Subnet6: "fd00:1::/64",
			Resolv4: netip.MustParseAddr("198.18.100.1"), Resolv6: netip.MustParseAddr("fd00:100::1"),
			Metric: 100, Table: 101}, true
	case "wwan0":
		return PathPlan{Name: "wwan0", Router: "r-wwan0",
			Client4: netip.MustParseAddr("198.18.2.2"), Client6: netip.MustParseAddr("fd00:2::2"),
			Gateway4: netip.MustParseAddr("198.18.2.1"), Gateway6: netip.MustParseAddr("fd00:2::1"),
			Subnet4: "198.18.2.0/24", Subnet6: "fd00:2::/64",
			Resolv4: netip.MustParseAddr("198.18.100.2"), Resolv6: netip.MustParseAddr("fd00:100::2"),
			Metric: 200, Table: 102}, true
	}
	return PathPlan{}, false
}

// ServerName resolves to the test servers (Server4, Server6) on every
// path's resolver, beside the world's names.
const ServerName = "server.lab"

// V4OnlyName resolves to V4OnlyAddr only (no AAAA): a DNS64 synthesizes
// its AAAA from the NAT64 prefix.
const V4OnlyName = "v4only.lab"

// V4OnlyAddr is a public target address (AnyIP: its servers answer).
var V4OnlyAddr = netip.MustParseAddr("198.19.127.254")

// Fixed addresses of the Internet side.
var (
	Server4 = netip.MustParseAddr("198.18.200.1")
	Server6 = netip.MustParseAddr("fd00:200::1")
	// PublicPrefixes are AnyIP target prefixes the lab config marks public.
	PublicPrefixes = []netip.Prefix{netip.MustParsePrefix("198.19.0.0/17"), netip.MustParsePrefix("fd00:ff::/64")}
	// PrivatePrefixes are AnyIP target prefixes treated as private/reserved.
	PrivatePrefixes = []netip.Prefix{netip.MustParsePrefix("198.19.128.0/17"), netip.MustParsePrefix("fd00:fe::/64")}
	// PortalAddr4 and PortalAddr6 are the captive portal's addresses: a
	// portal path's DNS answers them for every name.
	PortalAddr4 = netip.MustParseAddr("198.18.199.1")
	PortalAddr6 = netip.MustParseAddr("fd00:199::1")
)

// PortalName is the captive portal's host: its login page's and its
// certificate's only name.
const PortalName = "portal.lab"

// Ports of the servers every lab runs in the Internet namespace, on every
// address (test servers and AnyIP targets alike).
const (
	PortHTTPS = 443  // accepts, reads until EOF, closes (TCP-connect probes)
	PortHTTP  = 80   // same as 443
	PortSink  = 5001 // MPTCP/TCP: reads until EOF, then writes the byte count as 8 bytes big endian
	PortSrc   = 5002 // MPTCP/TCP: reads an 8-byte big endian count N, writes N bytes, closes
	PortEcho  = 7    // UDP echo, replying from the address it was reached on (AnyIP targets too)
	// The captive portal's HTTP (302 to its login page) and HTTPS (a
	// certificate for PortalName only); a portal path's TCP 80 and 443
	// are redirected to them.
	PortPortalHTTP  = 8180
	PortPortalHTTPS = 8143
)

// Options of a lab.
type Options struct {
	// Name is the lab name: namespaces are mpt-NAME-c (client) and
	// mpt-NAME-i (Internet). Default "default".
	Name string
	// Dir holds lab.json, config.yaml, the world files and the control
	// socket. Default /run/mptester/lab/NAME.
	Dir string
	// WorldSeed and Domains generate the synthetic Internet (Domains 0:
	// no domains, targets only); WorldFile loads one instead.
	WorldSeed int64
	Domains   int
	WorldFile string
	// WorldShares tunes the generated world's categories (nil: defaults).
	WorldShares *world.Shares
	// World, when set, is served as is (tests build their own).
	World *world.World
	// CellBackup marks the wwan0 MPTCP endpoint backup.
	CellBackup bool
	// Params are initial path settings, per path name.
	Params map[string]emu.Change
	// Impair are initial impairments, per path name.
	Impair map[string]ImpairChange
	// Timeline is applied from the moment the lab is up.
	Timeline []emu.Event
	// KernelLink: the timeline's down/up also set the client interface
	// down/up (a named scenario sets it as it needs).
	KernelLink bool
	// Scenario names the timeline when it is a named one (recorded in
	// the truth).
	Scenario string
	// Seed of the emulators' randomness (loss, jitter).
	Seed   int64
	Logger *slog.Logger
}

// DefaultDir is where a lab keeps its state unless told otherwise.
func DefaultDir(name string) string { return filepath.Join("/run/mptester/lab", name) }

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,23}$`)

// ValidName reports whether name is usable as a lab name.
func ValidName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("invalid lab name %q: want 1-24 of a-z, 0-9 and '-', starting with a letter or digit", name)
	}
	return nil
}

func (o *Options) defaults() error {
	if o.Name == "" {
		o.Name = "default"
	}
	if err := ValidName(o.Name); err != nil {
		return err
	}
	if o.Dir == "" {
		o.Dir = DefaultDir(o.Name)
	}
	if o.Domains < 0 {
		return fmt.Errorf("invalid --domains %d", o.Domains)
	}
	for p := range o.Params {
		if _, ok := Plan(p); !ok {
			return fmt.Errorf("%w: %q (want wlan0 or wwan0)", ErrNoSuchPath, p)
		}
	}
	for p, c := range o.Impair {
		if _, ok := Plan(p); !ok {
			return fmt.Errorf("%w: %q (want wlan0 or wwan0)", ErrNoSuchPath, p)
		}
		if _, err := (Impair{}).Apply(c); err != nil {
			return fmt.Errorf("path %s: %w", p, err)
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// ErrNoSuchPath: a path name that is not wlan0 or wwan0.
var ErrNoSuchPath = errors.New("no such lab path")

// ClientNS and InternetNS name the namespaces of lab name.
func ClientNS(name string) string   { return "mpt-" + name + "-c" }
func InternetNS(name string) string { return "mpt-" + name + "-i" }

// tmpTUN is the name a TUN device has in the host namespace between its
// creation and its move into a lab namespace; derived from the lab name so
// a crashed lab's leftovers can be found (IFNAMSIZ allows 15 bytes).
func tmpTUN(name string, path int, side byte) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	return fmt.Sprintf("mt%08x%d%c", h.Sum32(), path, side)
}

// Info is lab.json: everything a user or a test needs to use the lab.
type Info struct {
	Name       string     `json:"name"`
	Dir        string     `json:"dir"`
	PID        int        `json:"pid"`
	StartedAt  time.Time  `json:"started_at"`
	Namespaces Namespaces `json:"namespaces"`
	Paths      []PathPlan `json:"paths"`
	// Resolvers per path, as in config.yaml's dns section.
	Resolvers map[string][]string `json:"resolvers"`
	Servers   []netip.Addr        `json:"servers"`
	// TestServer is the mptester test server on Servers (absent with
	// `lab up --no-serve`).
	TestServer      *TestServer    `json:"test_server,omitempty"`
	PublicPrefixes  []netip.Prefix `json:"public_prefixes"`
	PrivatePrefixes []netip.Prefix `json:"private_prefixes"`
	Ports           map[string]int `json:"ports"`
	CellBackup      bool           `json:"cell_backup"`
	WorldSeed       int64          `json:"world_seed"`
	Domains         int            `json:"domains"`
	Files           Files          `json:"files"`
}

// TestServer is what `mptester run` needs to reach the lab's test server.
type TestServer struct {
	// Ports per listening transport (the server's default ports).
	Ports       map[string][]int `json:"ports"`
	Fingerprint string           `json:"fingerprint"`
	// Run is a command that runs the patterns against it from the client.
	Run string `json:"run"`
}

// Namespaces of a lab.
type Namespaces struct {
	Client   string `json:"client"`
	Internet string `json:"internet"`
}

// Files a lab writes into its directory.
type Files struct {
	LabJSON string `json:"lab_json"`
	Config  string `json:"config"`
	Tranco  string `json:"tranco"`
	Truth   string `json:"truth"`
	World   string `json:"world"`
	Log     string `json:"log"`
	Control string `json:"control"`
	PID     string `json:"pid"`
}

// FilesIn returns the file layout of a lab directory.
func FilesIn(dir string) Files {
	j := func(n string) string { return filepath.Join(dir, n) }
	return Files{LabJSON: j("lab.json"), Config: j("config.yaml"), Tranco: j("tranco.csv"),
		Truth: j("truth.json"), World: j("world.json"), Log: j("lab.log"),
		Control: j("control.sock"), PID: j("pid")}
}

// Plan returns the plan of path name from the info.
func (i Info) Plan(name string) (PathPlan, bool) {
	for _, p := range i.Paths {
		if p.Name == name {
			return p, true
		}
	}
	return PathPlan{}, false
}

// PathStatus is the live state of one path.
type PathStatus struct {
	Name     string     `json:"name"`
	LinkDown bool       `json:"link_down"`
	Up       emu.Params `json:"up"`   // client -> Internet
	Down     emu.Params `json:"down"` // Internet -> client
	Stats    emu.Stats  `json:"stats"`
}

// Status is what `lab status` shows.
type Status struct {
	Info   Info         `json:"lab"`
	Uptime string       `json:"uptime"`
	Paths  []PathStatus `json:"paths"`
	// Timeline: the latest timeline's steps as they really happened.
	Timeline *TimelineTruth `json:"timeline,omitempty"`
	// Impairments planted on the paths now (ground truth).
	Impairments []ImpairmentTruth `json:"impairments,omitempty"`
}

// Errors of Up the commands map to exit codes.
var (
	ErrPermission  = errors.New("permission denied")
	ErrUnsupported = probe.ErrUnsupported
)
