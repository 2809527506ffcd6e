package transport

import (
	"encoding/binary"
	"errors"
)

// The kernel's own per-subflow MPTCP flags (include/uapi/linux/mptcp.h),
// read with inet_diag (sock_diag) as `ss -M` does: INET_DIAG_ULP_INFO ->
// INET_ULP_INFO_MPTCP -> MPTCP_SUBFLOW_ATTR_FLAGS. MPTCP_FULL_INFO has no
// flags, so this is where the backup bit of each subflow comes from.
const (
	// SubflowBackupRemote: the peer asked for the subflow to be a backup
	// (its MP_JOIN or MP_PRIO B bit).
	SubflowBackupRemote = 0x10
	// SubflowBackupLocal: this host marks the subflow backup (the
	// endpoint's backup flag, sent in MP_JOIN / MP_PRIO).
	SubflowBackupLocal = 0x20

	inetDiagMsgLen       = 72 // struct inet_diag_msg
	inetDiagULPInfo      = 19 // INET_DIAG_ULP_INFO
	inetULPInfoMPTCP     = 3  // INET_ULP_INFO_MPTCP
	mptcpSubflowAttrFlag = 8  // MPTCP_SUBFLOW_ATTR_FLAGS
	nlaTypeMask          = 0x3fff
)

var errNoSubflowFlags = errors.New("inet_diag: no MPTCP subflow flags (not an MPTCP subflow, or no CAP_NET_ADMIN)")

// DecodeSubflowFlags reads MPTCP_SUBFLOW_ATTR_FLAGS out of one sock_diag
// answer's payload (struct inet_diag_msg and its attributes, after the
// netlink header). Nothing is trusted: every length is checked.
func DecodeSubflowFlags(msg []byte) (uint32, error) {
	if len(msg) < inetDiagMsgLen {
		return 0, errNoSubflowFlags
	}
	ulp, ok := findAttr(msg[inetDiagMsgLen:], inetDiagULPInfo)
	if !ok {
		return 0, errNoSubflowFlags
	}
	mp, ok := findAttr(ulp, inetULPInfoMPTCP)
	if !ok {
		return 0, errNoSubflowFlags
	}
	f, ok := findAttr(mp, mptcpSubflowAttrFlag)
	if !ok || len(f) < 4 {
		return 0, errNoSubflowFlags
	}
	return binary.NativeEndian.Uint32(f), nil
}

// findAttr walks netlink attributes (u16 length, u16 type, value, padded
// to 4 bytes) for the first of type t.
func findAttr(b []byte, t uint16) ([]byte, bool) {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:]) & nlaTypeMask
		if l < 4 || l > len(b) {
			return nil, false
		}
		if typ == t {
			return b[4:l], true
		}
		next := (l + 3) &^ 3
		if next > len(b) {
			return nil, false
		}
		b = b[next:]
	}
	return nil, false
}
