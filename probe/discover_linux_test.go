package probe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// fakeSys builds a /sys/class/net tree: name -> files (relative path -> content;
// "->target" makes a symlink).
func fakeSys(t *testing.T, devs map[string]map[string]string) {
	root := t.TempDir()
	for dev, files := range devs {
		for rel, content := range files {
			p := filepath.Join(root, dev, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if target, ok := strings.CutPrefix(content, "->"); ok {
				if err := os.Symlink(target, p); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	old := sysClassNet
	sysClassNet = root
	t.Cleanup(func() { sysClassNet = old })
}

func TestLinuxKind(t *testing.T) {
	fakeSys(t, map[string]map[string]string{
		"wlp2s0":  {"wireless/x": "", "type": "1"},
		"mlan0":   {"uevent": "DEVTYPE=wlan\nINTERFACE=mlan0\n", "type": "1"},
		"usb0":    {"uevent": "DEVTYPE=wwan\n", "type": "1"},
		"enx0011": {"device/driver": "->/sys/bus/usb/drivers/qmi_wwan", "type": "1"},
		"eth0":    {"type": "1", "device/driver": "->/sys/bus/pci/drivers/e1000e"},
		"tun0":    {"type": "65534"},
		"wg0":     {"uevent": "DEVTYPE=wireguard\n", "type": "65534"},
		"wlan0":   {"type": "65534"}, // e.g. the lab's TUN named like a Wi-Fi device
		"wwan0":   {"type": "1"},
		"odd0":    {"type": "999"},
	})
	for name, want := range map[string]Kind{
		"wlp2s0": KindWiFi, "mlan0": KindWiFi, "usb0": KindCellular, "enx0011": KindCellular,
		"eth0": KindEthernet, "tun0": KindTunnel, "wg0": KindTunnel, "wlan0": KindWiFi,
		"wwan0": KindCellular, "odd0": KindUnknown, "missing0": KindUnknown,
	} {
		assert.Equal(t, want, linuxKind(name), name)
	}
}

func TestDefaultRouteIfaces(t *testing.T) {
	dir := t.TempDir()
	route := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"wlan0\t00000000\t011212C6\t0003\t0\t0\t100\t00000000\t0\t0\t0\n" +
		"wlan0\t001212C6\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n" +
		"eth1\t001312C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
	v6 := strings.Repeat("0", 32) + " 00 " + strings.Repeat("0", 32) + " 00 fd000002000000000000000000000001 000000c8 00000001 00000000 00000003 wwan0\n" +
		"fd000001000000000000000000000000 40 " + strings.Repeat("0", 32) + " 00 " + strings.Repeat("0", 32) + " 00000100 00000001 00000000 00000001 wlan0\n" +
		strings.Repeat("0", 32) + " 00 " + strings.Repeat("0", 32) + " 00 " + strings.Repeat("0", 32) + " ffffffff 00000001 00000000 00200200 lo\n"
	os.WriteFile(filepath.Join(dir, "route"), []byte(route), 0o644)
	os.WriteFile(filepath.Join(dir, "ipv6_route"), []byte(v6), 0o644)
	old := procNet
	procNet = dir
	t.Cleanup(func() { procNet = old })
	assert.Equal(t, map[string]bool{"wlan0": true, "wwan0": true}, defaultRouteIfaces())
}
