package probe

import (
	"bufio"
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mptester/mptester/internal/linkstats"
)

// sysfs and procfs roots; tests point them at fixtures.
var (
	sysClassNet   = "/sys/class/net"
	procNet       = linkstats.ProcNet("")
	resolvConf    = "/etc/resolv.conf"
	resolvedNetif = "/run/systemd/resolve/netif" // systemd-resolved per-link state, SERVERS=
	networkdLinks = "/run/systemd/netif/links"   // systemd-networkd per-link state, DNS=
)

// Drivers of USB/PCI modems that show up as plain Ethernet-type devices.
var cellularDrivers = map[string]bool{
	"qmi_wwan": true, "cdc_mbim": true, "cdc_ncm": true, "huawei_cdc_ncm": true,
	"cdc_ether": true, "sierra_net": true, "option": true, "rmnet": true,
	"rmnet_ipa": true, "ipheth": true, "mhi_net": true, "t7xx": true,
}

func interfaceKind(ifc net.Interface) Kind {
	if ifc.Flags&net.FlagLoopback != 0 {
		return KindLoopback
	}
	return linuxKind(ifc.Name)
}

// linuxKind reads what sysfs says about the device; the name is only a hint
// used when the device itself says nothing (TUN, veth: e.g. the lab's paths).
func linuxKind(name string) Kind {
	dir := filepath.Join(sysClassNet, name)
	if _, err := os.Stat(filepath.Join(dir, "wireless")); err == nil {
		return KindWiFi
	}
	if _, err := os.Stat(filepath.Join(dir, "phy80211")); err == nil {
		return KindWiFi
	}
	devtype := ueventValue(filepath.Join(dir, "uevent"), "DEVTYPE")
	switch devtype {
	case "wlan":
		return KindWiFi
	case "wwan":
		return KindCellular
	}
	if link, err := os.Readlink(filepath.Join(dir, "device", "driver")); err == nil && cellularDrivers[filepath.Base(link)] {
		return KindCellular
	}
	switch {
	case strings.HasPrefix(name, "wlan"), strings.HasPrefix(name, "wlp"), strings.HasPrefix(name, "wlx"):
		return KindWiFi
	case strings.HasPrefix(name, "wwan"), strings.HasPrefix(name, "rmnet"), strings.HasPrefix(name, "ccmni"), strings.HasPrefix(name, "wwp"):
		return KindCellular
	}
	switch devtype {
	case "wireguard", "vxlan", "gre", "ipip", "sit", "tun":
		return KindTunnel
	}
	// ARPHRD_* from if_arp.h.
	switch readInt(filepath.Join(dir, "type")) {
	case 1: // ARPHRD_ETHER
		return KindEthernet
	case 65534, 768, 769, 776, 778, 823: // NONE (tun), TUNNEL, TUNNEL6, SIT, IPGRE, IP6GRE
		return KindTunnel
	case 772:
		return KindLoopback
	}
	return KindUnknown
}

func ueventValue(file, key string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func readInt(file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return n
}

// defaultRouteIfaces reads the main routing table from procfs (no netlink
// dependency): /proc/net/route for IPv4, /proc/net/ipv6_route for IPv6.
func defaultRouteIfaces() map[string]bool {
	out := map[string]bool{}
	if f, err := os.Open(filepath.Join(procNet, "route")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			// Iface Destination Gateway Flags RefCnt Use Metric Mask ...
			if len(fs) >= 8 && fs[1] == "00000000" && fs[7] == "00000000" {
				out[fs[0]] = true
			}
		}
		f.Close()
	}
	if f, err := os.Open(filepath.Join(procNet, "ipv6_route")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			// dest plen src splen nexthop metric refcnt use flags iface
			if len(fs) >= 10 && fs[0] == strings.Repeat("0", 32) && fs[1] == "00" && fs[9] != "lo" {
				out[fs[9]] = true
			}
		}
		f.Close()
	}
	return out
}

// osPerInterfaceDNS: systemd-resolved's per-link state first, then
// systemd-networkd's, then NetworkManager (nmcli) for links with none.
func osPerInterfaceDNS(ctx context.Context, paths []Path) map[string][]DNSServer {
	out := map[string][]DNSServer{}
	for _, p := range paths {
		idx := strconv.Itoa(p.Index)
		if s := parseServerList(stateValue(filepath.Join(resolvedNetif, idx), "SERVERS")); len(s) > 0 {
			out[p.Name] = servers(s, DNSSourceSystemdResolved, false)
		} else if s := parseServerList(stateValue(filepath.Join(networkdLinks, idx), "DNS")); len(s) > 0 {
			out[p.Name] = servers(s, DNSSourceSystemdResolved, false)
		}
	}
	if nm, err := exec.LookPath("nmcli"); err == nil {
		for _, p := range paths {
			if len(out[p.Name]) > 0 || p.Kind == KindLoopback {
				continue
			}
			if s := nmcliDNS(ctx, nm, p.Name); len(s) > 0 {
				out[p.Name] = servers(s, DNSSourceNetworkManager, false)
			}
		}
	}
	return out
}

func stateValue(file, key string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			return v
		}
	}
	return ""
}

func nmcliDNS(ctx context.Context, nmcli, iface string) []netip.AddrPort {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, nmcli, "-t", "-f", "IP4.DNS,IP6.DNS", "device", "show", iface).Output()
	if err != nil {
		return nil
	}
	return parseNmcli(string(b))
}

// sharedDNS reads /etc/resolv.conf: the OS does not say which interface
// these belong to, so every path gets them, marked shared.
func sharedDNS() []DNSServer {
	b, err := os.ReadFile(resolvConf)
	if err != nil {
		return nil
	}
	return servers(parseResolvConf(string(b)), DNSSourceResolvConf, true)
}
